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


@pytest.mark.parametrize("layout", [{"multiprocess": True}, {"tp_size": 2}], ids=["worker", "tp2"])
def test_workers_verify_drafts_and_keep_greedy_tokens(tiny_dir: Path, make_engine, expected, layout) -> None:
    engine = make_engine(tiny_dir, speculative_algorithm="NGRAM", **layout)
    try:
        alone = [engine.generate(p, GREEDY) for p in PROMPTS]
        assert [o["output_ids"] for o in alone] == expected
        assert all(o["meta_info"]["spec_verify_ct"] == GREEDY["max_new_tokens"] - 1 for o in alone)
        engine.flush_cache()
        assert [o["output_ids"] for o in engine.generate(PROMPTS, GREEDY)] == expected
        stats = engine.get_stats()
        assert stats["num_verify_passes"] > 0 and stats["num_draft_tokens"] > 0
        engine.check_invariants()
    finally:
        engine.shutdown()
