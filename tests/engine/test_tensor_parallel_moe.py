"""Tensor parallelism of the mixture-of-experts families on CPU (gloo, 2 ranks): every rank holds
half of each expert's (and the shared expert's, and the dense layers') intermediate dimension;
greedy tokens equal `transformers`' alone and batched, with cache hits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sglr.testing.tiny_families import write_family_checkpoint

GREEDY = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
PROMPTS = ["The quick brown fox jumps over", "def main():\n    return", "Once upon a time there was"]


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe"])
def test_tp2_moe_greedy_tokens_equal_transformers(family: str, tmp_path: Path, make_engine) -> None:
    from transformers import AutoModelForCausalLM

    model_dir = write_family_checkpoint(tmp_path / family, family, seed=5)
    hf = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    engine = make_engine(model_dir, tp_size=2, max_total_tokens=2048)
    try:
        expected = []
        for prompt in PROMPTS:
            prompt_ids = engine.tokenizer.encode(prompt)
            with torch.no_grad():
                ref = hf.generate(
                    torch.tensor([prompt_ids]), max_new_tokens=8, min_new_tokens=8, do_sample=False
                )
            expected.append(ref[0, len(prompt_ids) :].tolist())
            assert engine.generate(prompt, GREEDY)["output_ids"] == expected[-1]
        again = engine.generate(PROMPTS, GREEDY)  # batched, on cached prompts
        assert all(r["meta_info"]["cached_tokens"] > 0 for r in again)
        assert [r["output_ids"] for r in again] == expected
    finally:
        engine.shutdown()
