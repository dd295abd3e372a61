"""Quantized linear layers on the CPU: a GGUF file's blocks (Q4_0 / Q4_1, Q5_0 / Q5_1, Q8_0, and the
K-quants Q4_K / Q5_K / Q6_K) held as stored by `sglr._core.GgufMatrix` (rust/kernels) and multiplied as such (`q4_matrix`
builds a 4-bit one from levels, scales and zeros).

Few rows (decode batches, short prefill chunks) run the integer kernels: the activations are
quantized to int8 per block of 32 and every block's dot product is an exact integer sum
(AVX-512 VNNI or AVX2), scaled once. Many rows dequantize the weight to the activations' dtype
for that one call (a transient copy, freed after it) and use oneDNN's GEMM, which is faster there.

Why not torch's `_weight_int4pack_mm_for_cpu` (used before): its float dequantize-and-FMA inner
loop makes a batch-1 step's 120 matmuls of SmolLM2 cost 6.2 ms on one thread; the integer kernel
takes about 5.4 ms for the same 120 alone, and inside the fused decode step
(`sglr.model.cpu_fused_decode`) it needs no bf16 round trips and splits over threads
(benches/results/smollm2_cpu_gguf.md). K-quants have no torch kernel at all.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

Q4_BLOCK_LEN = 32
# Up to this many rows the integer kernel runs; beyond, a transient dequantized copy and
# oneDNN's GEMM (SmolLM2, one thread, all 120 matmuls: 43 ms at 16 rows against ~80 ms
# dequantize + GEMM; the two meet near 32).
MAX_KERNEL_ROWS = 32


def q4_supported(out_features: int, in_features: int) -> bool:
    """Whether a weight of this shape can be held as 4-bit blocks."""
    return out_features > 0 and in_features % Q4_BLOCK_LEN == 0


def q4_matrix(levels: np.ndarray, scales: np.ndarray, zeros: np.ndarray):
    """levels `[N, K]` uint8 (0..15), scales and zeros `[N, K / 32]` float32, in the
    `(q - 8) * scale + zero` form -> a 4-bit `sglr._core.GgufMatrix`."""
    from sglr._core import GgufMatrix

    if levels.ndim != 2 or not q4_supported(*levels.shape):
        raise ValueError(f"4-bit weights need K % {Q4_BLOCK_LEN} == 0, got shape {levels.shape}")
    return GgufMatrix.from_levels(
        np.ascontiguousarray(levels, dtype=np.uint8),
        np.ascontiguousarray(scales, dtype=np.float32),
        np.ascontiguousarray(zeros, dtype=np.float32),
    )


def gguf_matrix(parts: list[tuple[str, np.ndarray]], cols: int):
    """`parts`: `(GGUF type name, [rows, bytes_per_row] uint8 blocks)` in row order ->
    `sglr._core.GgufMatrix` of `cols` columns (the bytes are copied once, into Rust). Raises
    ValueError for a type without a kernel or blocks that do not fit the shape."""
    from sglr._core import GgufMatrix

    return GgufMatrix([(name, np.ascontiguousarray(blocks, dtype=np.uint8)) for name, blocks in parts], cols)


def quantized_linear(x: torch.Tensor, matrix) -> torch.Tensor:
    """`x @ W.T` for `x` `[T, K]` (CPU, any float dtype) and a `GgufMatrix`, in x's dtype."""
    if x.shape[0] <= MAX_KERNEL_ROWS:
        return integer_matmul(x, matrix, matrix.rows).to(x.dtype)
    return F.linear(x, dequantize_matrix(matrix, x.dtype))


def integer_matmul(x: torch.Tensor, matrix, num_rows: int) -> torch.Tensor:
    """fp32 `x @ W.T` through the integer kernel (`x` quantized to int8 per block of 32) of a
    `GgufMatrix` or `Q8Matrix` of `num_rows` rows, for any number of rows of `x`: also the path
    of quantized heads, too large to dequantize per call."""
    inputs = x.detach().to(torch.float32).contiguous().numpy()
    out = np.empty((inputs.shape[0], num_rows), dtype=np.float32)
    matrix.matmul(inputs, out, torch.get_num_threads())
    return torch.from_numpy(out)


def quantized_rows(matrix, row_ids: np.ndarray) -> torch.Tensor:
    """Rows `row_ids` of a `GgufMatrix`, dequantized, fp32 `[len(row_ids), K]` (lookups)."""
    out = np.empty((len(row_ids), matrix.cols), dtype=np.float32)
    matrix.dequantize_rows(row_ids, out)
    return torch.from_numpy(out)


def dequantize_matrix(matrix, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The weight as a dense `[N, K]` tensor of `dtype` (float32 or bfloat16: rounded once)."""
    if dtype == torch.bfloat16:
        out = torch.empty(matrix.rows, matrix.cols, dtype=torch.bfloat16)
        matrix.dequantize(out.view(torch.int16).numpy(), torch.get_num_threads())
        return out
    dense = np.empty((matrix.rows, matrix.cols), dtype=np.float32)
    matrix.dequantize(dense, torch.get_num_threads())
    return torch.from_numpy(dense).to(dtype)
