"""Speculative decoding in worker processes: drafts are made and verified on rank 0, the same
verify batches run on every rank (tp=2 over gloo), and the greedy tokens equal those of an
in-process engine without speculation, alone and batched."""

from __future__ import annotations

from pathlib import Path

import pytest

GREEDY = {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}
PROMPTS = [
    "a b c d e f a b c d e f a b c",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def main():\n    return main()\n\ndef main():",
]


@pytest.fixture(scope="module")
def expected(tiny_dir: Path, make_engine) -> list[list[int]]:
    plain = make_engine(tiny_dir)
    try:
        return [plain.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    finally:
        plain.shutdown()


@pytest.mark.parametrize(
    "layout",
    [{"multiprocess": True}, {"tp_size": 2}, {"tp_size": 2, "speculative_algorithm": "STANDALONE"}],
    ids=["worker", "tp2", "tp2-draft-model"],
)
def test_workers_verify_drafts_and_keep_greedy_tokens(tiny_dir: Path, make_engine, expected, layout) -> None:
    """A draft model runs on rank 0 only (one process, its own KV cache)."""
    layout = dict(layout)
    algorithm = layout.pop("speculative_algorithm", "NGRAM")
    draft = {"speculative_draft_model_path": str(tiny_dir)} if algorithm == "STANDALONE" else {}
    engine = make_engine(tiny_dir, speculative_algorithm=algorithm, **draft, **layout)
    try:
        alone = [engine.generate(p, GREEDY) for p in PROMPTS]
        assert [o["output_ids"] for o in alone] == expected
        # The first token comes from the prompt's pass; each decode pass adds 1 + its accepted drafts.
        for out in alone:
            meta = out["meta_info"]
            assert 1 + meta["spec_verify_ct"] + meta["spec_accepted_tokens"] == GREEDY["max_new_tokens"]
        engine.flush_cache()
        assert [o["output_ids"] for o in engine.generate(PROMPTS, GREEDY)] == expected
        stats = engine.get_stats()
        assert stats["num_verify_passes"] > 0 and stats["num_draft_tokens"] > 0
        engine.check_invariants()
    finally:
        engine.shutdown()
