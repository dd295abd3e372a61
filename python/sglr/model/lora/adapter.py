"""A LoRA adapter as the runner applies it: per (layer, projection), a low-rank pair whose
product, added to the base projection's output, is the adapter's change to it.

Projection names are the checkpoint ones (`q_proj` ... `down_proj`); an adapter of a fused
checkpoint projection (`qkv_proj`, `gate_up_proj`) is stored as its parts, which share one
`lora_a` tensor (so the runner computes that shrink once).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The projections an adapter may change, as checkpoints name them.
LORA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Fused checkpoint projections -> their parts, in row order.
FUSED_LORA_PROJECTIONS = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}


@dataclass(frozen=True)
class LoraWeights:
    """`delta(x) = x @ lora_a.T @ lora_b.T`: lora_a `[rank, in_features]`, lora_b `[out_features,
    rank]` with the adapter's scaling (`alpha / rank`, or `alpha / sqrt(rank)` for rsLoRA)
    already applied. fp32, on the CPU, in checkpoint shapes (the whole model's, not a rank's)."""

    lora_a: torch.Tensor
    lora_b: torch.Tensor

    @property
    def rank(self) -> int:
        return int(self.lora_a.shape[0])


@dataclass(frozen=True)
class LoraAdapter:
    """name: what requests call it; path: where it was read; rank: its largest rank;
    projections: the projection names it changes, sorted; weights: (layer id, projection) ->
    the pair."""

    name: str
    path: str
    rank: int
    projections: tuple[str, ...]
    weights: dict[tuple[int, str], LoraWeights]

    @property
    def num_params(self) -> int:
        return sum(w.lora_a.numel() + w.lora_b.numel() for w in self.weights.values())
