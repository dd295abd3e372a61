"""Constrained decoding in the engine: per-request FSM state, masks and jump-forward.

Compilation happens off the scheduler thread (the engine's compile pool) through the shared
`ConstraintCache`, so one slow pattern never stalls other requests, and a bad one fails only
its own request with a clear 400-style error.

Jump-forward: when the FSM leaves only one way forward, the forced bytes are appended at once.
The boundary is re-tokenized, so the tokens are the tokenizer's own: the just-sampled token's
bytes plus the forced bytes are encoded together; that token run is accepted only if the FSM
walks it from the state before the sampled token (the DFA is byte-level, so any tokenization
of the same bytes normally is). Otherwise the forced bytes are encoded alone after the sampled
token, and failing that the step proceeds one token at a time.
"""

from __future__ import annotations

import threading
from typing import Any

from sglr.engine.constraints import ConstraintCache, vocabulary_from_hf
from sglr.engine.request import Req
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import ConstraintError, InvalidRequestError
from sglr.sampling_params import SamplingParams


class ConstraintState:
    """One request's position in its FSM."""

    def __init__(self, fsm: Any) -> None:
        self.fsm = fsm
        self.state: int = fsm.start_state  # a property of the TokenFsm binding
        self.state_before_last: int = self.state

    @property
    def is_complete(self) -> bool:
        """The FSM has taken EOS: only EOS could follow."""
        return self.fsm.is_terminal(self.state)

    def advance(self, token_id: int) -> bool:
        nxt = self.fsm.try_advance(self.state, token_id)
        if nxt is None:
            return False
        self.state_before_last, self.state = self.state, nxt
        return True

    def walk(self, state: int, token_ids: list[int]) -> int | None:
        for token_id in token_ids:
            nxt = self.fsm.try_advance(state, token_id)
            if nxt is None:
                return None
            state = nxt
        return state


class ConstraintCompiler:
    """Compiles `regex` / `json_schema` sampling params against the engine's vocabulary."""

    def __init__(self, tokenizer: EngineTokenizer, model_vocab_size: int) -> None:
        self.tokenizer = tokenizer
        self.model_vocab_size = model_vocab_size
        self.cache = ConstraintCache()
        self._vocabulary: Any = None
        self._vocab_lock = threading.Lock()

    @property
    def num_hits(self) -> int:
        return self.cache.num_hits

    def vocabulary(self) -> Any:
        with self._vocab_lock:
            if self._vocabulary is None:
                self._vocabulary = vocabulary_from_hf(self.tokenizer.hf, sorted(self.tokenizer.eos_token_ids))
            return self._vocabulary

    def compile(self, params: SamplingParams) -> ConstraintState:
        vocabulary = self.vocabulary()
        try:
            if params.regex is not None:
                fsm = self.cache.regex(params.regex, vocabulary)
            else:
                fsm = self.cache.json_schema(params.json_schema, vocabulary)
        except ConstraintError as exc:
            field = "regex" if params.regex is not None else "json_schema"
            raise InvalidRequestError(f"invalid {field}: {exc}", param=f"sampling_params.{field}") from exc
        return ConstraintState(fsm)

    def jump_forward(self, req: Req, sampled_id: int) -> list[int] | None:
        """Token ids to append instead of just `sampled_id` (already walked by the FSM), or
        None when nothing is forced. Updates the request's FSM state to match."""
        constraint: ConstraintState = req.constraint
        forced, _ = constraint.fsm.jump_forward(constraint.state)
        if not forced:
            return None
        vocabulary = self.vocabulary()
        sampled_bytes = vocabulary.token_bytes(sampled_id)
        hf = self.tokenizer.hf
        if sampled_bytes is not None:
            joined = _decode_utf8(sampled_bytes + forced)
            if joined is not None:
                tokens = hf.encode(joined, add_special_tokens=False)
                end = constraint.walk(constraint.state_before_last, tokens)
                if tokens and end is not None:
                    constraint.state = end
                    return tokens
        forced_text = _decode_utf8(forced)
        if forced_text is None:
            return None
        tokens = hf.encode(forced_text, add_special_tokens=False)
        end = constraint.walk(constraint.state, tokens)
        if not tokens or end is None:
            return None
        constraint.state = end
        return [sampled_id, *tokens]


def _decode_utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
