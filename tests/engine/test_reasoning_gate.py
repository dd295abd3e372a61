"""A constraint behind a reasoning tag (`reasoning_close_tag`, `reasoning_open_tag`): free text up
to the close tag, the constraint from there on; masks of each phase, and end to end on the tiny
model with the tag made likely by a logit bias."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from sglr.engine.constraints.masker import build_token_masks
from sglr.engine.constraints.reasoning_gate import ReasoningGate
from sglr.engine.constraints.runtime import Constraints
from sglr.engine.constraints.state import ConstraintState
from sglr.engine.engine import Engine
from sglr.errors import InvalidSamplingParamsError
from sglr.sampling_params import SamplingParams

DIGITS = r"[0-9]{3}"


def single_token_word(engine: Engine, avoid: set[int] = frozenset()) -> tuple[str, int]:
    """A word the tiny tokenizer spells as one token (no digit in it)."""
    for word in ("the", " the", "def", " and", "fox", " is", "return"):
        ids = engine.tokenizer.encode(word)
        if len(ids) == 1 and ids[0] not in avoid:
            return word, ids[0]
    raise AssertionError("no single-token word in the tiny vocabulary")


def request(engine: Engine, **params) -> SimpleNamespace:
    req = SimpleNamespace(params=SamplingParams(**params), output_ids=[], stop_token_ids=[0], constraint=None)
    done = []
    constraints = Constraints(engine.tokenizer)
    constraints.start_compile(req, lambda r, error: done.append(error))
    constraints._pool.shutdown(wait=True)  # the compile has run when this returns
    assert done == [None]
    return req


def allowed(mask: np.ndarray, row: int, vocab_size: int) -> set[int]:
    bits = mask.view(np.uint32)[row]
    return {t for t in range(vocab_size) if bits[t >> 5] >> (t & 31) & 1}


def test_each_phase_masks_as_it_should(engine: Engine) -> None:
    vocab_size = engine.tokenizer.vocab_size
    close_word, close_id = single_token_word(engine)
    open_word, open_id = single_token_word(engine, {close_id})
    plain = request(engine, regex=DIGITS)
    digits = allowed(build_token_masks([plain], vocab_size), 0, vocab_size)
    assert digits and open_id not in digits and close_id not in digits

    req = request(
        Constraints(engine.tokenizer),
        regex=DIGITS,
        reasoning_open_tag=open_word,
        reasoning_close_tag=close_word,
    )
    constraints = Constraints(engine.tokenizer)
    gate = req.constraint
    assert isinstance(gate, ReasoningGate) and gate.undecided
    assert allowed(build_token_masks([req], vocab_size), 0, vocab_size) == digits | {open_id}
    assert constraints.accept(req, open_id) == [open_id] and req.constraint is gate
    free = allowed(build_token_masks([req], vocab_size), 0, vocab_size)
    assert free == set(range(vocab_size)) - {0}  # reasoning: anything but the stop token
    for token in (open_id, 5, close_id):
        req.output_ids.append(token)
        assert constraints.accept(req, token) == [token]
    assert isinstance(req.constraint, ConstraintState)  # the regex from its start
    assert allowed(build_token_masks([req], vocab_size), 0, vocab_size) == digits

    # Undecided, a first token that is not the open tag is the answer's: the regex judges it.
    answer_first = request(engine, regex=DIGITS, reasoning_open_tag=open_word, reasoning_close_tag=close_word)
    first_digit = min(digits)
    assert Constraints(engine.tokenizer).accept(answer_first, first_digit) == [first_digit]
    assert isinstance(answer_first.constraint, ConstraintState)
    refused = request(engine, regex=DIGITS, reasoning_open_tag=open_word, reasoning_close_tag=close_word)
    assert Constraints(engine.tokenizer).accept(refused, close_id) is None


def test_the_constraint_starts_after_the_close_tag(engine: Engine) -> None:
    close_word, close_id = single_token_word(engine)
    base = {"temperature": 0, "max_new_tokens": 12, "regex": DIGITS, "logit_bias": {str(close_id): 100.0}}
    gated, plain = engine.generate(
        ["The quick brown fox", "The quick brown fox"], [{**base, "reasoning_close_tag": close_word}, base]
    )
    # The bias makes the tag the first reasoning token; the regex then rules what follows.
    assert gated["output_ids"][0] == close_id
    assert re.fullmatch(re.escape(engine.tokenizer.decode([close_id])) + DIGITS, gated["text"]), gated["text"]
    assert re.fullmatch(DIGITS, plain["text"]), plain["text"]
    assert gated["meta_info"]["finish_reason"]["type"] == "stop"
    engine.check_invariants()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"reasoning_open_tag": "<think>"}, "reasoning_open_tag"),
        ({"reasoning_close_tag": ""}, "reasoning_close_tag"),
        ({"reasoning_close_tag": "x" * 65}, "reasoning_close_tag"),
    ],
)
def test_bad_tags_are_refused_by_name(params: dict, field: str) -> None:
    with pytest.raises(InvalidSamplingParamsError) as caught:
        SamplingParams.from_dict(params)
    assert caught.value.param == f"sampling_params.{field}"
