"""A GGUF checkpoint under tensor parallelism: converted once by the parent, then each of two
ranks (gloo, worker processes) reads only its slices; greedy tokens equal the single-process
engine's on the same file."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf_testing import TinySpec, write_tiny_gguf

from sglr.engine.engine import Engine

GREEDY = {"temperature": 0, "max_new_tokens": 10, "ignore_eos": True}
PROMPTS = ["The capital of France is", "def add(a, b):", "I counted 12 apples"]


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_tp2_from_gguf_equals_tp1(tmp_path: Path, architecture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLR_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(gguf, TinySpec(architecture=architecture, tied_embeddings=False))
    # Dequantized on both sides: 4-bit GGUF weights (the default on one rank) are not sharded.
    options = {
        "device": "cpu",
        "max_total_tokens": 4096,
        "debug_invariants": True,
        "gguf_weights": "dequantized",
    }
    tp1 = Engine(model_path=str(gguf), **options)
    tp2 = Engine(model_path=str(gguf), tp_size=2, **options)
    try:
        assert len(tp2.worker_pids) == 2
        expected = [r["output_ids"] for r in tp1.generate(PROMPTS, GREEDY)]
        assert [r["output_ids"] for r in tp2.generate(PROMPTS, GREEDY)] == expected
        assert all(len(ids) == GREEDY["max_new_tokens"] for ids in expected)
    finally:
        tp2.shutdown()
        tp1.shutdown()
