"""Linear layers on the CPU with weights prepacked for oneDNN.

`F.linear` on the CPU repacks the weight matrix into the GEMM's blocked layout at every call.
For few rows (an expert's share of a decode batch: a handful of tokens) that repacking costs
more than the multiplication itself: prepacking once (the way torch's own CPU compiler does)
makes small-batch expert GEMMs about twice as fast here, and large ones ~20% faster. The result
is fp32 GEMM as well (a different summation order only).

A packed copy is a second copy of the weight in host memory; `SGLR_CPU_PREPACK=0` turns packing
off. `pack_weight` returns None then, and where oneDNN cannot be used (not a CPU tensor, another
dtype, a torch build without it); callers then use `F.linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sglr.envs import cpu_prepack

# The row count oneDNN tunes the packed layout for; any count works with any packing.
_PACK_ROWS_HINT = 32


def pack_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """weight `[N, K]` -> an opaque prepacked copy for `packed_linear`, or None."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16):
        return None
    if not cpu_prepack() or not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), _PACK_ROWS_HINT)
    except (AttributeError, RuntimeError):  # an op missing from this build
        return None


def packed_linear(x: torch.Tensor, weight: torch.Tensor, packed: torch.Tensor | None) -> torch.Tensor:
    """`x @ weight.T` through the prepacked copy when there is one."""
    if packed is None:
        return F.linear(x, weight)
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
