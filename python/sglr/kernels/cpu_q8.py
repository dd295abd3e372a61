"""An 8-bit output head on the CPU: GGUF Q8_0 rows (int8 levels, one scale per 32) multiplied as
such by `sglr._core.q8_matmul_transposed` (rust/quant: AVX2 when the CPU has it).

Why: a batch-1 decode step of a small model spends a third of its time reading the output head
(SmolLM2: 49,152 x 576). Its GGUF rows are Q8_0; read as int8 they are half the bytes of bf16, and
the kernel computes in f32 from the exact levels and scales (more exact than the bf16 copy). The
kernel is one pass over the weight per input row, so it wins for a row or two and loses to
oneDNN's bf16 GEMM beyond (timings at `Q8_MAX_KERNEL_ROWS`): from `Q8_MAX_KERNEL_ROWS + 1` rows on, the head
runs on its dense copy as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

Q8_BLOCK_LEN = 32
# Rows of hidden states up to which the Q8 kernel beats oneDNN's bf16 GEMM on the head (one
# thread, SmolLM2's head: 1 row 2.6 vs 5.4 ms, 2 rows 3.4 vs 5.1 ms, 3 rows 5.1 vs 4.4 ms).
Q8_MAX_KERNEL_ROWS = 2


@dataclass(frozen=True)
class Q8Weight:
    """`levels` int8 `[N, K]` and `scales` float32 `[N, K / 32]`, C-contiguous numpy arrays:
    weight `(n, k) = levels[n, k] * scales[n, k // 32]`."""

    levels: np.ndarray
    scales: np.ndarray

    def __post_init__(self) -> None:
        rows, cols = self.levels.shape
        if self.levels.dtype != np.int8 or self.scales.dtype != np.float32:
            raise ValueError("Q8 levels must be int8 and scales float32")
        if cols % Q8_BLOCK_LEN or self.scales.shape != (rows, cols // Q8_BLOCK_LEN):
            raise ValueError(f"Q8 scales {self.scales.shape} do not match levels {self.levels.shape}")

    @property
    def shape(self) -> tuple[int, int]:
        return self.levels.shape


def q8_linear(x: torch.Tensor, weight: Q8Weight) -> torch.Tensor:
    """`x` `[n, K]` (any float dtype, CPU) -> fp32 `x @ W.T` `[n, N]`."""
    from sglr._core import q8_matmul_transposed

    inputs = x.detach().to(torch.float32).contiguous().numpy()
    out = np.empty((inputs.shape[0], weight.shape[0]), dtype=np.float32)
    q8_matmul_transposed(weight.levels, weight.scales, inputs, out, torch.get_num_threads())
    return torch.from_numpy(out)


def q8_rows(weight: Q8Weight, row_ids: np.ndarray) -> torch.Tensor:
    """Rows `row_ids` of the weight, dequantized, fp32 `[len(row_ids), K]`."""
    from sglr._core import q8_dequantize_rows

    out = np.empty((len(row_ids), weight.shape[1]), dtype=np.float32)
    q8_dequantize_rows(weight.levels, weight.scales, row_ids, out)
    return torch.from_numpy(out)
