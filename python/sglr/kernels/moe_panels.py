"""Routed expert MLPs on the CPU in one call per MoE block: `sglr._core.moe_expert_mlp`
(rust/kernels' moe) over expert weights packed once in column panels.

Why: a decode step gives each expert a handful of tokens, and the cost is reading every
expert's weights. oneDNN's prepacked GEMM (`cpu_linear`) reads them at about half the machine's
memory speed at a row or two, and the torch loop around it adds a dozen small ops per expert.
The kernel streams each panel of an expert's weight once for all its tokens (up to 6 rows per
pass) and does the routing, activation and weighted sum itself. With more tokens per expert
oneDNN wins (`moe_grouped.PANEL_MAX_PAIRS_PER_EXPERT` picks).

Float32 only, and only where the hidden size and twice the intermediate size are multiples of
`PANEL` (every released MoE model); else `pack_expert_panels` returns None and callers use the
torch loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Output columns per packed panel (rust/kernels' `moe::PANEL`; the binding checks the shapes).
PANEL = 16


@dataclass(frozen=True)
class ExpertPanels:
    """`w13` `[E, 2I / PANEL, H, PANEL]` and `w2` `[E, H / PANEL, I, PANEL]`: each expert's
    `[N, K]` matrix as `[N / PANEL, K, PANEL]`, contiguous."""

    w13: torch.Tensor
    w2: torch.Tensor


def pack_panels(weights: torch.Tensor) -> torch.Tensor:
    """Stacked `[E, N, K]` -> `[E, N / PANEL, K, PANEL]` (element `(e, n, k)` at
    `[e, n // PANEL, k, n % PANEL]`); N must be a multiple of `PANEL`."""
    num, rows, cols = weights.shape
    return weights.reshape(num, rows // PANEL, PANEL, cols).transpose(2, 3).contiguous()


def pack_expert_panels(w13: torch.Tensor, w2: torch.Tensor) -> ExpertPanels | None:
    """The packed copies of stacked experts `w13` `[E, 2I, H]`, `w2` `[E, H, I]`, or None where
    the kernel does not apply (not float32 on the CPU, sizes off the panel width). Callers check
    `sglr.envs.cpu_moe_kernel` (the kernel can be turned off)."""
    if w13.device.type != "cpu" or w13.dtype != torch.float32:
        return None
    if w13.shape[1] % PANEL or w2.shape[1] % PANEL:
        return None
    return ExpertPanels(pack_panels(w13.detach()), pack_panels(w2.detach()))


def panel_expert_mlp(
    hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, panels: ExpertPanels
) -> torch.Tensor:
    """`expert_mlp`'s contract (`[T, H]` float32 -> `[T, H]`) on the packed experts; the kernel
    splits its work over torch's thread count."""
    from sglr._core import moe_expert_mlp

    hidden = hidden.contiguous()
    out = torch.empty_like(hidden)
    moe_expert_mlp(
        hidden.numpy(),
        panels.w13.numpy(),
        panels.w2.numpy(),
        topk_ids.to(torch.int64).contiguous().numpy(),
        topk_weights.to(torch.float32).contiguous().numpy(),
        out.numpy(),
        torch.get_num_threads(),
    )
    return out
