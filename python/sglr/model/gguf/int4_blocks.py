"""GGUF's 4-bit block formats as groupwise int4 (levels, scales, zeros), without dequantizing.

A Q4_0 block is 32 weights as `d * (q - 8)` (fp16 `d`, then 16 bytes of nibbles); a Q4_1 block
is `d * q + m` (fp16 `d`, fp16 `m`, 16 bytes). Byte j of a block holds weight j in its low
nibble and weight j + 16 in its high one. Both are `(q - 8) * scale + zero` with scale `d` and
zero `0` (Q4_0) or `m + 8 d` (Q4_1): the form `sglr.kernels.cpu_q4.q4_matrix` takes.
"""

from __future__ import annotations

import numpy as np

from sglr.model.gguf.names import unpermute_rope_rows
from sglr.model.gguf.reader import GGUFTensor

INT4_TYPE_NAMES = ("Q4_0", "Q4_1")
BLOCK_LEN = 32
_BLOCK_BYTES = {"Q4_0": 18, "Q4_1": 20}


def int4_groups(
    tensor: GGUFTensor, rope_heads: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """levels `[N, K]` uint8 (0..15), scales and zeros `[N, K / 32]` float32 of a Q4_0/Q4_1
    matrix. `rope_heads`: restore llama's query/key row order (as the dequantizing converter
    does) for that many heads."""
    kind = tensor.type_name
    if kind not in INT4_TYPE_NAMES or len(tensor.shape) != 2:
        raise ValueError(f"{tensor.name}: not a Q4_0/Q4_1 matrix ({kind}, shape {tensor.shape})")
    rows, cols = tensor.shape
    blocks = np.asarray(tensor.data).reshape(rows, cols // BLOCK_LEN, _BLOCK_BYTES[kind])
    scales = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if kind == "Q4_1":
        zeros = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32) + 8 * scales
    else:
        zeros = np.zeros_like(scales)
    nibbles = blocks[..., -16:]
    levels = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1).reshape(rows, cols)
    if rope_heads is not None:
        levels = unpermute_rope_rows(levels, rope_heads)
        scales = unpermute_rope_rows(scales, rope_heads)
        zeros = unpermute_rope_rows(zeros, rope_heads)
    return levels, scales, zeros
