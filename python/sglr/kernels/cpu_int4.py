"""Weight-only int4 linear layers on the CPU: 4-bit weights in groups of 32 along the input
dimension, each group with its own scale and zero (`w = (q - 8) * scale + zero`, q in 0..15),
multiplied by torch's `_weight_int4pack_mm_for_cpu` with bf16 activations.

Why this kernel (benches/cpu_quant_kernels.py, results in benches/results/cpu_quant_kernels.md):
a small model's decode step is bound by reading its weights; 4-bit weights are a quarter of bf16's
bytes, which makes a batch-1 step's matmuls about twice as fast. The kernel loses to oneDNN's bf16
GEMM from a few rows on, so many rows (prefill) dequantize the weight to bf16 for that one call
instead (a transient copy, freed after the call).

GGUF's Q4_0 (`d * (q - 8)`) and Q4_1 (`d * q + m`) blocks are exactly this format with scale `d`
and zero `0` or `m + 8 d`; the scales and zeros are stored in bf16 (the kernel takes them in the
activations' dtype), which rounds GGUF's fp16 scales to 8 significant bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

INT4_GROUP_SIZE = 32
# The kernel's packed layout interleaves output rows in tiles of this many.
INT4_ROW_TILE = 64
# Up to this many rows the int4 kernel runs; beyond, a transient bf16 copy of the weight and
# oneDNN's GEMM (one thread, SmolLM2's 3072 x 576 gate/up: the kernel takes 5.7 ms at 128 rows
# and 22 ms at 512, dequantizing 3.6 ms plus the bf16 GEMM 2 ms and 9 ms).
INT4_MAX_KERNEL_ROWS = 128


@dataclass(frozen=True)
class Int4Weight:
    """A `[out_features, in_features]` weight: `packed` as the kernel wants it, and
    `scale_zero` `[in_features / 32, out_features, 2]` bf16."""

    packed: torch.Tensor
    scale_zero: torch.Tensor
    out_features: int
    in_features: int

    @property
    def num_bytes(self) -> int:
        return self.packed.numel() * self.packed.element_size() + self.scale_zero.numel() * 2


def int4_supported(out_features: int, in_features: int) -> bool:
    """Whether a weight of this shape fits the kernel's tiling."""
    return out_features % INT4_ROW_TILE == 0 and in_features % INT4_GROUP_SIZE == 0


def pack_int4(levels: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> Int4Weight:
    """levels `[N, K]` integers in 0..15, scales and zeros `[N, K / 32]` (float) -> `Int4Weight`."""
    out_features, in_features = levels.shape
    if not int4_supported(out_features, in_features):
        raise ValueError(f"int4 weights need N % {INT4_ROW_TILE} == 0 and K % {INT4_GROUP_SIZE} == 0")
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(levels.to(torch.int32).contiguous(), 1)
    scale_zero = torch.stack([scales.T, zeros.T], dim=-1).to(torch.bfloat16).contiguous()
    return Int4Weight(packed, scale_zero, out_features, in_features)


def int4_linear(x: torch.Tensor, weight: Int4Weight) -> torch.Tensor:
    """`x @ W.T` for bf16 `x` `[T, K]`."""
    if x.shape[0] <= INT4_MAX_KERNEL_ROWS:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(
            x, weight.packed, INT4_GROUP_SIZE, weight.scale_zero
        )
    return F.linear(x, dequantize_int4(weight))


def dequantize_int4(weight: Int4Weight) -> torch.Tensor:
    """The weight as bf16 `[N, K]`, computed as the kernel does (fp32 `(q - 8) * scale + zero`)."""
    n, k = weight.out_features, weight.in_features
    half = INT4_ROW_TILE // 2
    # Packed layout: byte (tile, col, j) holds row tile*64 + j in its low nibble, + 32 in its high.
    tiles = weight.packed.view(n // INT4_ROW_TILE, k, half)
    levels = torch.empty(n // INT4_ROW_TILE, INT4_ROW_TILE, k, dtype=torch.uint8)
    torch.bitwise_and(tiles, 15, out=levels[:, :half].transpose(1, 2))
    torch.bitwise_right_shift(tiles, 4, out=levels[:, half:].transpose(1, 2))
    scale_zero = weight.scale_zero.float()  # [K/G, N, 2]
    scales = scale_zero[..., 0].T[..., None]  # [N, K/G, 1]
    offsets = scale_zero[..., 1].T[..., None] - 8 * scales
    # In place on one fp32 copy: 4x faster than `levels * scales + offsets` (mixed dtypes).
    values = levels.view(n, k // INT4_GROUP_SIZE, INT4_GROUP_SIZE).float()
    values.mul_(scales).add_(offsets)
    return values.view(n, k).to(torch.bfloat16)
