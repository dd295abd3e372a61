"""Speculative decoding end to end on the tiny fp32 model: greedy output token for token equal
to decoding without it (alone, batched, with and without the radix cache, under retraction),
stops and length limits inside an accepted run, logprobs of accepted tokens, seeded sampling,
the counters in meta_info and the engine's stats; KV accounting checked after every step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from oracle_drafter import FlatCosts, OracleDrafter

from sglr.engine.engine import Engine
from sglr.errors import EngineConfigError

GREEDY = {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}
PROMPTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def main():\n    return main()\n\ndef main():",
    "a b c d e f a b c d e f a b c",
    "Return the value of the attribute",
]


@pytest.fixture(scope="module")
def plain(tiny_dir: Path, make_engine) -> Iterator[Engine]:
    engine = make_engine(tiny_dir)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def speculative(tiny_dir: Path, make_engine) -> Iterator[Engine]:
    engine = make_engine(tiny_dir, speculative_algorithm="NGRAM")
    yield engine
    engine.shutdown()


def _references(engine: Engine, prompts: list[str], params: dict) -> list[list[int]]:
    outs = engine.generate(prompts, params)
    return [engine.tokenizer.encode(p) + o["output_ids"] for p, o in zip(prompts, outs, strict=True)]


def _use_drafter(engine: Engine, drafter) -> None:
    """The loop asks `drafter` from the next pass on, and the budget allots drafts whatever the
    passes cost (so what a test sees does not depend on the machine's timing)."""
    speculator = engine._scheduler._speculator
    speculator.drafter = drafter
    speculator.budget.costs = FlatCosts()


def _ids(outs: list[dict]) -> list[list[int]]:
    return [o["output_ids"] for o in outs]


def test_ngram_greedy_equals_plain_greedy_alone_and_batched(plain: Engine, speculative: Engine) -> None:
    _use_drafter(speculative, speculative._scheduler._speculator.drafter.__class__(1, 12, 4, 256))
    expected = [plain.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    before = speculative.get_stats()
    alone = [speculative.generate(p, GREEDY) for p in PROMPTS]
    assert _ids(alone) == expected
    for out in alone:  # the prompt's pass gives the first token, each decode pass 1 + its accepted
        meta = out["meta_info"]
        assert 1 + meta["spec_verify_ct"] + meta["spec_accepted_tokens"] == GREEDY["max_new_tokens"]
    speculative.flush_cache()
    assert _ids(speculative.generate(PROMPTS, GREEDY)) == expected
    assert speculative.get_stats()["num_verify_passes"] > before["num_verify_passes"]


def test_drafts_holding_the_answer_are_accepted_and_change_nothing(
    plain: Engine, speculative: Engine
) -> None:
    refs = _references(plain, PROMPTS, GREEDY)
    drafter = OracleDrafter(refs, plain.runner.vocab_size)
    _use_drafter(speculative, drafter)
    before = speculative.get_stats()
    alone = [speculative.generate(p, GREEDY) for p in PROMPTS]
    assert [plain.tokenizer.encode(p) + o["output_ids"] for p, o in zip(PROMPTS, alone, strict=True)] == refs
    for out in alone:
        meta = out["meta_info"]
        # 7 drafts per pass: a wrong sibling and a wrong branch, the right path 5 deep.
        assert meta["spec_accepted_tokens"] > 0
        assert meta["spec_verify_ct"] < GREEDY["max_new_tokens"] / 2
    stats = speculative.get_stats()
    assert stats["num_accepted_draft_tokens"] > before["num_accepted_draft_tokens"]
    assert drafter.num_proposed > 0
    speculative.flush_cache()
    batched = speculative.generate(PROMPTS, GREEDY)
    assert [
        plain.tokenizer.encode(p) + o["output_ids"] for p, o in zip(PROMPTS, batched, strict=True)
    ] == refs


def test_drafts_that_turn_wrong_are_cut_where_they_turn(plain: Engine, speculative: Engine) -> None:
    refs = _references(plain, PROMPTS, GREEDY)
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size, wrong_after=2))
    outs = [speculative.generate(p, GREEDY) for p in PROMPTS]
    assert [plain.tokenizer.encode(p) + o["output_ids"] for p, o in zip(PROMPTS, outs, strict=True)] == refs
    for out in outs:  # at most two accepted per pass
        assert 0 < out["meta_info"]["spec_accepted_tokens"] <= 2 * out["meta_info"]["spec_verify_ct"]


@pytest.mark.parametrize("max_new_tokens", [2, 3, 5, 9])
def test_a_length_limit_inside_an_accepted_run(
    plain: Engine, speculative: Engine, max_new_tokens: int
) -> None:
    params = dict(GREEDY, max_new_tokens=max_new_tokens)
    refs = _references(plain, PROMPTS, dict(GREEDY, max_new_tokens=30))
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    expected = _ids(plain.generate(PROMPTS, params))
    assert _ids(speculative.generate(PROMPTS, params)) == expected
    assert all(len(ids) == max_new_tokens for ids in expected)


def test_stop_tokens_and_strings_inside_an_accepted_run(plain: Engine, speculative: Engine) -> None:
    refs = _references(plain, PROMPTS, GREEDY)
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    for prompt, ref in zip(PROMPTS, refs, strict=True):
        output = ref[len(plain.tokenizer.encode(prompt)) :]
        by_token = dict(GREEDY, ignore_eos=False, stop_token_ids=[output[5]])
        expected = plain.generate(prompt, by_token)
        got = speculative.generate(prompt, by_token)
        assert got["output_ids"] == expected["output_ids"] and got["text"] == expected["text"]
        assert got["meta_info"]["finish_reason"] == expected["meta_info"]["finish_reason"]
        stop_text = plain.tokenizer.decode(output[6:8]).strip()
        if stop_text:
            by_string = dict(GREEDY, stop=[stop_text])
            expected = plain.generate(prompt, by_string)
            got = speculative.generate(prompt, by_string)
            assert (got["text"], got["output_ids"]) == (expected["text"], expected["output_ids"])


def test_logprobs_of_accepted_tokens_are_the_models(plain: Engine, speculative: Engine) -> None:
    refs = _references(plain, PROMPTS, GREEDY)
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    kwargs = {"return_logprob": True, "top_logprobs_num": 3}
    alone = [plain.generate(p, GREEDY, **kwargs) for p in PROMPTS]
    batched = plain.generate(PROMPTS, GREEDY, **kwargs)
    got = [speculative.generate(p, GREEDY, **kwargs) for p in PROMPTS]

    def logprobs(out: dict) -> np.ndarray:
        return np.array([lp for lp, _, _ in out["meta_info"]["output_token_logprobs"]])

    # A verify pass is a decode batch of more rows: it may differ from one request alone by what
    # batching differs by on this machine.
    tolerance = 4 * max(
        float(np.abs(logprobs(a) - logprobs(b)).max()) for a, b in zip(alone, batched, strict=True)
    )
    for want, have in zip(alone, got, strict=True):
        assert have["output_ids"] == want["output_ids"]
        assert np.abs(logprobs(have) - logprobs(want)).max() <= tolerance + 1e-6
        want_top = [[t for _, t, _ in top] for top in want["meta_info"]["output_top_logprobs"]]
        have_top = [[t for _, t, _ in top] for top in have["meta_info"]["output_top_logprobs"]]
        assert have_top == want_top


@pytest.mark.parametrize(
    "extra",
    [{}, {"top_k": 20, "min_p": 0.02}, {"frequency_penalty": 0.5}],
    ids=["top-p", "top-k-min-p", "penalty"],
)
def test_seeded_sampling_gives_the_tokens_it_gives_without_speculation(
    plain: Engine, speculative: Engine, extra: dict
) -> None:
    """A row's token is drawn with the noise of the request's seed at that row's step: drafts
    change how many passes the tokens take, never which tokens they are."""
    params = dict(
        {"temperature": 0.8, "top_p": 0.9, "max_new_tokens": 16, "ignore_eos": True, "seed": 11}, **extra
    )
    expected = _ids([plain.generate(p, params) for p in PROMPTS])
    refs = [plain.tokenizer.encode(p) + ids for p, ids in zip(PROMPTS, expected, strict=True)]
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    alone = [speculative.generate(p, params) for p in PROMPTS]
    assert _ids(alone) == expected
    assert sum(o["meta_info"]["spec_accepted_tokens"] for o in alone) > 0
    assert _ids(speculative.generate(PROMPTS, params)) == expected


def test_retraction_with_drafts_in_flight(tiny_dir: Path, make_engine) -> None:
    prompts = [f"{p} {i}" for i in range(3) for p in PROMPTS]
    params = dict(GREEDY, max_new_tokens=40)
    small = {"max_total_tokens": 320, "max_running_requests": 12}
    plain = make_engine(tiny_dir, **small)
    expected = _ids(plain.generate(prompts, params))
    plain.shutdown()
    refs = [plain.tokenizer.encode(p) + ids for p, ids in zip(prompts, expected, strict=True)]
    engine = make_engine(tiny_dir, speculative_algorithm="NGRAM", speculative_max_verify_rows=64, **small)
    _use_drafter(engine, OracleDrafter(refs, engine.runner.vocab_size))
    try:
        assert _ids(engine.generate(prompts, params)) == expected
        stats = engine.get_stats()
        assert stats["num_retractions"] > 0 and stats["num_accepted_draft_tokens"] > 0
    finally:
        engine.shutdown()


def test_a_large_batch_takes_no_drafts(speculative: Engine) -> None:
    """The verify rows (8 on the CPU) are full with 8 requests: they decode without drafts."""
    prompts = [f"{PROMPTS[2]} {i}" for i in range(8)]
    before = speculative.get_stats()
    speculative.generate(prompts, dict(GREEDY, max_new_tokens=6))
    after = speculative.get_stats()
    assert after["num_draft_tokens"] == before["num_draft_tokens"]
    assert after["num_decode_passes"] > before["num_decode_passes"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"speculative_algorithm": "EAGLE3"}, "not available yet"),
        ({"speculative_algorithm": "MEDUSA"}, "must be one of"),
        ({"speculative_algorithm": "NGRAM", "speculative_draft_model_path": "/x"}, "draft-model"),
        ({"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 1}, ">= 2"),
        ({"speculative_algorithm": "NGRAM", "speculative_eagle_topk": 4}, "draft-model"),
        ({"speculative_algorithm": "STANDALONE"}, "speculative_draft_model_path"),
        (
            {
                "speculative_algorithm": "NGRAM",
                "speculative_ngram_min_match_window_size": 5,
                "speculative_ngram_max_match_window_size": 2,
            },
            "max_match_window_size",
        ),
    ],
)
def test_bad_speculative_options_are_refused(tiny_dir: Path, options: dict, message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        Engine(model_path=str(tiny_dir), device="cpu", **options)


@pytest.mark.parametrize(
    "extra",
    [
        {"frequency_penalty": 0.8, "presence_penalty": 0.3},
        {"repetition_penalty": 1.3},
        {"min_new_tokens": 12, "ignore_eos": False},
        {"logit_bias": {"7": 3.0, "11": -2.0}},
    ],
    ids=["frequency-presence", "repetition", "min-new-tokens", "logit-bias"],
)
def test_penalties_and_biases_see_the_draft_path(plain: Engine, speculative: Engine, extra: dict) -> None:
    """Greedy with penalties depends on the tokens before each position: a draft's row must be
    penalized as if its path had been generated."""
    params = dict(GREEDY, **extra)
    refs = _references(plain, PROMPTS, params)
    drafter = OracleDrafter(refs, plain.runner.vocab_size)
    _use_drafter(speculative, drafter)
    outs = [speculative.generate(p, params) for p in PROMPTS]
    assert [plain.tokenizer.encode(p) + o["output_ids"] for p, o in zip(PROMPTS, outs, strict=True)] == refs
    assert sum(o["meta_info"]["spec_accepted_tokens"] for o in outs) > 0


@pytest.mark.parametrize("jump_forward", [True, False], ids=["jump-forward", "one-token-at-a-time"])
@pytest.mark.parametrize(
    "constraint",
    [
        {"regex": r"(ab|cd)+[0-9]{3}-(yes|no)"},
        {
            "json_schema": '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, '
            '"age": {"type": "integer"}}, "required": ["name", "age"]}'
        },
    ],
    ids=["regex", "json-schema"],
)
def test_fsm_constrained_requests_draft_within_their_constraint(
    tiny_dir: Path, make_engine, constraint: dict, jump_forward: bool
) -> None:
    params = dict(GREEDY, max_new_tokens=40, **constraint)
    options = {"disable_jump_forward": not jump_forward}
    plain = make_engine(tiny_dir, **options)
    refs = _references(plain, PROMPTS, params)
    expected = [o["text"] for o in plain.generate(PROMPTS, params)]
    plain.shutdown()
    engine = make_engine(tiny_dir, speculative_algorithm="NGRAM", **options)
    drafter = OracleDrafter(refs, engine.runner.vocab_size)
    _use_drafter(engine, drafter)
    try:
        outs = [engine.generate(p, params) for p in PROMPTS]
        assert [
            engine.tokenizer.encode(p) + o["output_ids"] for p, o in zip(PROMPTS, outs, strict=True)
        ] == refs
        assert [o["text"] for o in outs] == expected
        assert engine.get_stats()["num_accepted_draft_tokens"] > 0
    finally:
        engine.shutdown()


def test_a_draft_the_fsm_forbids_is_cut_before_verification() -> None:
    from sglr._core import TokenFsm  # noqa: F401  (the binding the constraint states use)
    from sglr.engine.speculative.tree import DraftTree

    class EvenOnly:
        """An FSM over token ids: even ids move to state + 1, odd ones are forbidden."""

        def try_advance(self, state: int, token_id: int) -> int | None:
            return state + 1 if token_id % 2 == 0 else None

    tree = DraftTree()
    a = tree.add(-1, 2)
    tree.add(a, 3)  # forbidden: cut with its child
    tree.add(tree.children[a + 1][3], 4)
    tree.add(a, 6)
    tree.add(-1, 5)  # forbidden
    kept = tree.constrained(EvenOnly(), 10)
    assert kept is not None
    kept.check_invariants()
    assert [kept.path_tokens(n) for n in range(len(kept))] == [[2], [2, 6]]
    assert kept.fsm_states == [11, 12]
    assert DraftTree.chain([1, 2]).constrained(EvenOnly(), 0) is None


@pytest.mark.parametrize("top_k", [1, 3], ids=["chain", "top-3-tree"])
def test_a_draft_model_drafts_and_changes_nothing(
    plain: Engine, tiny_dir: Path, make_engine, top_k: int
) -> None:
    """STANDALONE with the target's own weights as the draft model (its greedy drafts are the
    target's tokens, so long runs are accepted) and with other weights (most are rejected)."""
    from sglr.testing.tiny import tiny_model_path

    expected = [plain.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    for draft_dir, min_accepted in (
        (tiny_dir, GREEDY["max_new_tokens"] // 2),
        (tiny_model_path("llama", seed=1), 0),
    ):
        engine = make_engine(
            tiny_dir,
            speculative_algorithm="STANDALONE",
            speculative_draft_model_path=str(draft_dir),
            speculative_eagle_topk=top_k,
        )
        engine._scheduler._speculator.budget.costs = FlatCosts()
        try:
            alone = [engine.generate(p, GREEDY) for p in PROMPTS]
            assert _ids(alone) == expected
            assert all(o["meta_info"]["spec_accepted_tokens"] >= min_accepted for o in alone)
            assert _ids(engine.generate(PROMPTS, GREEDY)) == expected
            params = dict(GREEDY, temperature=0.8, seed=5)
            assert _ids(engine.generate(PROMPTS, params)) == _ids(engine.generate(PROMPTS, params))
        finally:
            engine.shutdown()


def test_a_draft_model_of_another_vocabulary_is_refused(tiny_dir: Path) -> None:
    from sglr.testing.tiny import tiny_model_path

    other = tiny_model_path("llama", vocab_size=512)
    with pytest.raises(EngineConfigError, match="vocabulary"):
        Engine(model_path=str(tiny_dir), device="cpu", speculative_algorithm="STANDALONE",
               speculative_draft_model_path=str(other))  # fmt: skip


def test_only_accepted_tokens_reach_the_prefix_cache(plain: Engine, speculative: Engine) -> None:
    refs = _references(plain, PROMPTS[:1], GREEDY)
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    speculative.flush_cache()
    out = speculative.generate(PROMPTS[0], GREEDY)
    assert out["meta_info"]["spec_accepted_tokens"] > 0
    tokens = np.array(refs[0], dtype=np.int32)
    tree = speculative._scheduler._pool.tree
    cached, _ = tree.match_prefix(tokens)
    assert cached.size == tokens.size - 1  # the prompt and every output token but the last (no KV)
    num_prompt = len(speculative.tokenizer.encode(PROMPTS[0]))
    for position in range(num_prompt, tokens.size - 1):  # the decoys the drafter offered
        decoy = tokens[: position + 1].copy()
        decoy[position] = (decoy[position] + 1) % plain.runner.vocab_size
        assert tree.match_prefix(decoy)[0].size == position
    speculative.check_invariants()


def test_an_aborted_stream_frees_its_drafts_kv(plain: Engine, speculative: Engine) -> None:
    refs = _references(plain, PROMPTS[:1], dict(GREEDY, max_new_tokens=200))
    _use_drafter(speculative, OracleDrafter(refs, plain.runner.vocab_size))
    before = speculative.get_stats()["num_aborted"]
    stream = speculative.generate(PROMPTS[0], dict(GREEDY, max_new_tokens=200), stream=True)
    next(stream)
    next(stream)
    stream.close()
    deadline = time.monotonic() + 30
    while speculative.get_stats()["num_running_requests"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stats = speculative.get_stats()
    assert stats["num_aborted"] == before + 1
    assert stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]
    speculative.check_invariants()
