"""An 8-bit embedding and output head on the CPU: GGUF Q8_0 rows (int8 levels, one scale per 32)
held by `sglr._core.Q8Matrix` (rust/kernels owns the one copy; no dense copy is kept).

Why: a batch-1 decode step of a small model spends a third of its time reading the output head
(SmolLM2: 49,152 x 576), and the dense bf16 rows are 56 MB more resident memory (112 MB once
oneDNN's prepacked copy for many-row logits exists). Read as int8 they are half the bytes of bf16.
`q8_logits`: up to `Q8_MAX_KERNEL_ROWS` rows in f32 from the exact levels and scales (the matrix's
f32 kernel, more exact than a bf16 copy); more rows quantize the activations to int8 per block of 32
and use the integer kernel, which unpacks each weight block once per four rows (as the fused CPU
decode step, `sglr.model.cpu_fused_decode`, does for its head). Lookups (`q8_rows`) dequantize the
rows asked for.
"""

from __future__ import annotations

import numpy as np
import torch

from sglr.kernels.cpu_quantized import integer_matmul

Q8_BLOCK_LEN = 32
# Rows of hidden states up to which logits come from f32 activations (one pass over the rows
# per input: cheap for a row or two, the exact product); beyond, int8 activations.
Q8_MAX_KERNEL_ROWS = 2


class Q8Weight:
    """A `[N, K]` weight `(n, k) = levels[n, k] * scales[n, k // 32]` from int8 `levels` and
    float32 `scales` `[N, K / 32]`; the Rust matrix keeps a copy, the arrays can be dropped."""

    def __init__(self, levels: np.ndarray, scales: np.ndarray) -> None:
        from sglr._core import Q8Matrix

        if levels.dtype != np.int8 or scales.dtype != np.float32:
            raise ValueError("Q8 levels must be int8 and scales float32")
        rows, cols = levels.shape
        if cols % Q8_BLOCK_LEN or scales.shape != (rows, cols // Q8_BLOCK_LEN):
            raise ValueError(f"Q8 scales {scales.shape} do not match levels {levels.shape}")
        self.matrix = Q8Matrix(np.ascontiguousarray(levels), np.ascontiguousarray(scales))

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    @property
    def levels(self) -> np.ndarray:
        """A copy of the levels (tests and checks)."""
        return self.matrix.arrays()[0]

    @property
    def scales(self) -> np.ndarray:
        """A copy of the scales."""
        return self.matrix.arrays()[1]


def q8_linear(x: torch.Tensor, weight: Q8Weight) -> torch.Tensor:
    """`x` `[n, K]` (any float dtype, CPU) -> fp32 `x @ W.T` `[n, N]`."""
    inputs = x.detach().to(torch.float32).contiguous().numpy()
    out = np.empty((inputs.shape[0], weight.shape[0]), dtype=np.float32)
    weight.matrix.matmul_f32(inputs, out, torch.get_num_threads())
    return torch.from_numpy(out)


def q8_logits(hidden: torch.Tensor, weight: Q8Weight) -> torch.Tensor:
    """fp32 logits `[n, N]` of `hidden` `[n, K]` (CPU): f32 activations for a row or two, int8
    activations for more."""
    if hidden.shape[0] <= Q8_MAX_KERNEL_ROWS:
        return q8_linear(hidden, weight)
    return integer_matmul(hidden, weight.matrix, weight.shape[0])


def q8_rows(weight: Q8Weight, row_ids: np.ndarray) -> torch.Tensor:
    """Rows `row_ids` of the weight, dequantized, fp32 `[len(row_ids), K]`."""
    out = np.empty((len(row_ids), weight.shape[1]), dtype=np.float32)
    weight.matrix.dequantize_rows(row_ids, out)
    return torch.from_numpy(out)
