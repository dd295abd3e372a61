"""RMSNorm of a few CPU rows in one Rust call (`sglr._core.rms_norm`, rust/kernels' norm).

Why: torch's `rms_norm` on a bf16 row is a composite of ~8 ops (~30 us for SmolLM2's 576-wide
row, one thread), 61 times per decode step. The kernel rounds as the reference does (normalize in
fp32, round to the dtype, multiply by the weight). Many rows (prefill) stay on torch, which
spreads them over threads.
"""

from __future__ import annotations

import torch

from sglr.kernels.numpy_views import BIT_VIEWS, numpy_view

# Rows up to which the kernel runs (decode batches); beyond, torch's threaded composite.
CPU_NORM_MAX_ROWS = 64


def kernel_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and x.dtype in BIT_VIEWS
        and weight.dtype == x.dtype
        and x.is_contiguous()
        and x.numel() <= CPU_NORM_MAX_ROWS * x.shape[-1]
        and not torch.is_grad_enabled()
    )


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`weight * rms_normalized(x)` over the last dim, for inputs `kernel_applies` accepts."""
    from sglr._core import rms_norm as rust_rms_norm

    rows = x.view(-1, x.shape[-1])
    out = torch.empty_like(rows)
    rust_rms_norm(numpy_view(rows), numpy_view(weight), eps, numpy_view(out))
    return out.view(x.shape)
