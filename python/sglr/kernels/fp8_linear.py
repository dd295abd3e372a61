"""FP8 (e4m3) linear layers: weights stored as `float8_e4m3fn` with fp32 scales, activations
quantized per token at each call, `y = dequant(xq) dequant(wq)^T`.

Weight scales are `[N, G]`: one per output row and group of `group_size` input columns (G = 1:
per output channel, how online quantization and per-tensor / per-channel checkpoints load;
G > 1: a block-wise checkpoint's `[ceil(N/128), ceil(K/128)]` scales repeated over their rows).
Activation scales are `[M, 1]`: each token's amax / 448.

Two ways to compute the same product: on CUDA devices of compute capability 8.9 or more, with
per-channel weight scales and a bf16 input, `torch._scaled_mm` multiplies the fp8 values and
applies both scales in its epilogue; everywhere else (the CPU, older GPUs, block-wise scales,
fp32 / fp16 compute) the emulation dequantizes both operands to the compute dtype and runs a
plain matmul. The emulation is for correctness and portability, not speed: it rebuilds the
dense weight at every call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest finite e4m3fn value
# An all-zero row quantizes with this scale instead of dividing by zero.
_MIN_AMAX = 1e-12


@dataclass
class Fp8Weight:
    """weight `[N, K]` float8_e4m3fn; scale `[N, G]` float32; `group_size` input columns per
    scale column (K when G == 1)."""

    weight: torch.Tensor
    scale: torch.Tensor
    group_size: int

    def __post_init__(self) -> None:
        rows, cols = self.weight.shape
        groups = -(-cols // self.group_size)
        if self.weight.dtype != FP8_DTYPE:
            raise ValueError(f"fp8 weight must be float8_e4m3fn, got {self.weight.dtype}")
        if tuple(self.scale.shape) != (rows, groups):
            raise ValueError(f"fp8 scale {tuple(self.scale.shape)} != {(rows, groups)} for {(rows, cols)}")

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.weight.shape)

    @property
    def per_channel(self) -> bool:
        return self.scale.shape[1] == 1

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        """The dense `[N, K]` weight these values and scales stand for."""
        scale = self.scale
        if not self.per_channel:
            scale = scale.repeat_interleave(self.group_size, dim=1)[:, : self.weight.shape[1]]
        return (self.weight.to(torch.float32) * scale).to(dtype)


def quantize_per_channel(weight: torch.Tensor) -> Fp8Weight:
    """A dense `[N, K]` weight as e4m3 values with one fp32 scale per output row (amax / 448)."""
    values, scale = quantize_rows(weight)
    return Fp8Weight(values, scale, weight.shape[1])


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`[M, K]` -> (e4m3 values `[M, K]`, fp32 scales `[M, 1]`): each row over its amax / 448."""
    x32 = x.to(torch.float32)
    scale = x32.abs().amax(dim=-1, keepdim=True).clamp(min=_MIN_AMAX) / FP8_MAX
    return (x32 / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


def fp8_linear(x: torch.Tensor, weight: Fp8Weight) -> torch.Tensor:
    """`x [..., K]` (compute dtype) times the fp8 weight -> `[..., N]` in x's dtype, no bias."""
    lead = x.shape[:-1]
    rows = x.reshape(-1, x.shape[-1])
    values, scale = quantize_rows(rows)
    if uses_scaled_mm(rows, weight):
        out = torch._scaled_mm(
            values,
            weight.weight.t(),  # [K, N] column-major: a view of the row-major [N, K] values
            scale_a=scale,
            scale_b=weight.scale.view(1, -1),
            out_dtype=torch.bfloat16,
        )
    else:
        out = emulated_fp8_linear(values, scale, weight, x.dtype)
    return out.view(*lead, weight.shape[0])


def emulated_fp8_linear(
    values: torch.Tensor, scale: torch.Tensor, weight: Fp8Weight, dtype: torch.dtype
) -> torch.Tensor:
    """The product `torch._scaled_mm` computes, as dequantized operands in `dtype` and a matmul."""
    rows = (values.to(torch.float32) * scale).to(dtype)
    return F.linear(rows, weight.dequantized(dtype))


def uses_scaled_mm(x: torch.Tensor, weight: Fp8Weight) -> bool:
    """Whether `fp8_linear` runs `torch._scaled_mm` for this input: CUDA with fp8 tensor cores
    (compute capability >= 8.9), bf16 compute, per-channel scales, and dims it accepts
    (K and N multiples of 16)."""
    if x.device.type != "cuda" or x.dtype != torch.bfloat16 or not weight.per_channel:
        return False
    rows, cols = weight.shape
    return rows % 16 == 0 and cols % 16 == 0 and has_fp8_tensor_cores(x.device.index or 0)


@functools.cache
def has_fp8_tensor_cores(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index) >= (8, 9)
