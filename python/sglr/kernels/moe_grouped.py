"""Routed expert MLPs computed grouped by expert: each expert runs once, on its own tokens only.

A token routed to `top_k` experts makes `top_k` (token, expert) *pairs*; pair `p` is token
`p // top_k`'s choice number `p % top_k`. The pairs are sorted by expert, so each expert's
tokens are one contiguous run of rows: an expert's gated MLP is two matmuls over its run (no
compute for experts a token did not pick, no per-token loop). Each pair's output is scaled by its
routing weight and the `top_k` outputs of a token are summed in a fixed order (deterministic).

Expert weights are stacked: `w13 [E, 2*I, H]` (gate rows, then up rows) and `w2 [E, H, I]`.

`expert_mlp` picks the implementation: the fused Triton kernels (`triton_moe`) on CUDA; on the
CPU, for a few tokens per expert (decode), the rust kernel over panel-packed float32 experts
(`moe_panels`), else the torch loop over experts below (on oneDNN-prepacked weights, see
`cpu_linear`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sglr.envs import cpu_moe_kernel
from sglr.kernels.cpu_linear import packed_linear
from sglr.kernels.moe_panels import ExpertPanels, panel_expert_mlp

# Per expert, its prepacked (w13, w2) for `packed_linear` (see `sglr.kernels.cpu_linear`).
ExpertPacks = Sequence[tuple[torch.Tensor | None, torch.Tensor | None]]

# Routed (token, expert) pairs per expert, on average, up to which the rust kernel runs a call.
# Beyond, oneDNN's GEMM overlaps its arithmetic with the weight reads better (Mixtral-shaped
# experts, one thread, a shared box: 2 pairs per expert 2.0x faster in the kernel, 4 1.2x, 6
# even, 8 0.9x).
PANEL_MAX_PAIRS_PER_EXPERT = 5


@dataclass(frozen=True)
class CpuExperts:
    """A block's packed CPU copies of its experts: oneDNN's per expert, and the rust kernel's
    panels (float32 only; None where it does not apply or is turned off)."""

    packs: ExpertPacks
    panels: ExpertPanels | None


def expert_mlp(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    cpu_packs: CpuExperts | None = None,
) -> torch.Tensor:
    """hidden `[T, H]`, routing `[T, K]` -> `sum_k weight[t, k] * expert_{ids[t, k]}(hidden[t])`
    `[T, H]` (in hidden's dtype). `cpu_packs`: the experts' packed CPU weights, if any."""
    panels = cpu_packs.panels if cpu_packs is not None else None
    few_pairs = topk_ids.numel() <= PANEL_MAX_PAIRS_PER_EXPERT * w13.shape[0]
    if panels is not None and few_pairs and cpu_moe_kernel():
        return panel_expert_mlp(hidden, topk_weights, topk_ids, panels)
    if hidden.is_cuda:
        # Imported here: Triton decides at import whether it interprets (CPU) or compiles.
        from sglr.kernels.triton_moe import fused_expert_mlp

        return fused_expert_mlp(hidden, w13, w2, topk_weights, topk_ids)
    packs = cpu_packs.packs if cpu_packs is not None else None
    return grouped_expert_mlp(hidden, w13, w2, topk_weights, topk_ids, packs)


def grouped_expert_mlp(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    cpu_packs: ExpertPacks | None = None,
) -> torch.Tensor:
    """The torch implementation: a loop over the experts that got tokens (one host sync for the
    run lengths, so not for CUDA graphs)."""
    num_tokens, top_k = topk_ids.shape
    num_experts = w13.shape[0]
    flat_ids = topk_ids.reshape(-1)
    sorted_pair_ids = torch.argsort(flat_ids, stable=True)
    run_lengths = torch.bincount(flat_ids, minlength=num_experts).tolist()
    sorted_hidden = hidden.index_select(0, sorted_pair_ids // top_k)  # [T*K, H]
    sorted_out = torch.empty_like(sorted_hidden)
    start = 0
    for expert, length in enumerate(run_lengths):
        if length == 0:
            continue
        rows = slice(start, start + length)
        pack13, pack2 = cpu_packs[expert] if cpu_packs is not None else (None, None)
        gate, up = packed_linear(sorted_hidden[rows], w13[expert], pack13).chunk(2, dim=-1)
        sorted_out[rows] = packed_linear(F.silu(gate) * up, w2[expert], pack2)
        start += length
    pair_out = torch.empty_like(sorted_out)
    pair_out[sorted_pair_ids] = sorted_out
    return combine_pairs(pair_out, topk_weights, num_tokens, top_k)


def combine_pairs(
    pair_out: torch.Tensor, topk_weights: torch.Tensor, num_tokens: int, top_k: int
) -> torch.Tensor:
    """pair outputs `[T*K, H]` in pair order -> the routing-weighted sum per token `[T, H]`."""
    weighted = pair_out.view(num_tokens, top_k, -1) * topk_weights.to(pair_out.dtype)[:, :, None]
    return weighted.sum(dim=1)
