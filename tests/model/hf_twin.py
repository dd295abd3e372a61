"""The same tiny checkpoint through `transformers`: the correctness oracle."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch


@lru_cache(maxsize=8)
def load_hf(path: Path) -> torch.nn.Module:
    """fp32, greedy, never stopping early (eos disabled), so outputs have the asked length."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def hf_greedy(path: Path, prompt: list[int], max_new_tokens: int) -> list[int]:
    model = load_hf(path)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
        )
    return out[0, len(prompt) :].tolist()


def hf_logits(path: Path, token_ids: list[int]) -> torch.Tensor:
    """fp32 logits `[len, V]` at every position of one unpadded sequence."""
    with torch.no_grad():
        return load_hf(path)(torch.tensor([token_ids])).logits[0].float()
