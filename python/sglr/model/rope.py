"""Rotary position embeddings (rotate-half layout, as Llama and Qwen2 checkpoints use).

Every token carries its own position, so one batch can hold requests at different offsets
(a cached prefix of any length, or one decode token each).
"""

from __future__ import annotations

import math

import torch

from sglr.model.config import ModelConfig


def compute_inv_freq(config: ModelConfig) -> torch.Tensor:
    """Inverse frequencies `[head_dim // 2]` (fp32), with linear or Llama-3 scaling applied."""
    dim = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    scaling = config.rope_scaling
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    if scaling.rope_type == "llama3":
        old_context_len = scaling.original_max_position_embeddings
        assert old_context_len is not None  # checked by RopeScaling
        low_freq_wavelen = old_context_len / scaling.low_freq_factor
        high_freq_wavelen = old_context_len / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        # Long wavelengths are stretched by `factor`, short ones kept, the band between blended.
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
        smooth = (old_context_len / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
        blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium, blended, scaled)
    return inv_freq


class RotaryEmbedding(torch.nn.Module):
    """cos/sin tables of every position up to `max_positions` (see `lookup` and `apply_rope`)."""

    def __init__(self, config: ModelConfig, max_positions: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.head_dim = config.head_dim
        self.max_positions = max_positions
        inv_freq = compute_inv_freq(config)
        positions = torch.arange(max_positions, dtype=torch.float32)
        # NOTE: an fp32 outer product computes each angle with one rounding, as transformers does.
        freqs = positions[:, None] * inv_freq[None, :]  # [P, D/2]
        cos, sin = freqs.cos(), freqs.sin()
        # Full-width tables, the sine's first half negated: rotating is then
        # `x * cos + roll(x) * sin` (4 operations instead of 9 on the two halves).
        self.register_buffer("cos_cache", torch.cat((cos, cos), dim=-1).to(dtype), persistent=False)
        self.register_buffer("sin_cache", torch.cat((-sin, sin), dim=-1).to(dtype), persistent=False)

    def lookup(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, signed sin `[T, 1, D]` for `positions` `[T]`; computed once per step, shared by
        all layers."""
        cos = torch.nn.functional.embedding(positions, self.cos_cache)
        sin = torch.nn.functional.embedding(positions, self.sin_cache)
        return cos.unsqueeze(1), sin.unsqueeze(1)


def apply_rope(x: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """x `[T, H, D]` (any heads: q, k, or both stacked) -> rotated copy: the halves x1, x2 become
    `x1 cos - x2 sin` and `x2 cos + x1 sin` (the same roundings as computing them one by one)."""
    cos, signed_sin = cos_sin
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin
