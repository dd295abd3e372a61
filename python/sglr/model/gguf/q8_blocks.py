"""GGUF's Q8_0 block format as int8 levels and f32 scales, without dequantizing.

A Q8_0 block is 32 weights as `d * q`: fp16 `d`, then 32 signed bytes `q`.
"""

from __future__ import annotations

import numpy as np

from sglr.model.gguf.reader import GGUFTensor

Q8_0_BLOCK_LEN = 32
_BLOCK_BYTES = 34


def q8_0_levels_scales(tensor: GGUFTensor) -> tuple[np.ndarray, np.ndarray]:
    """levels `[N, K]` int8 and scales `[N, K / 32]` float32 of a Q8_0 matrix (fresh arrays)."""
    if tensor.type_name != "Q8_0" or len(tensor.shape) != 2:
        raise ValueError(f"{tensor.name}: not a Q8_0 matrix ({tensor.type_name}, shape {tensor.shape})")
    rows, cols = tensor.shape
    blocks = np.asarray(tensor.data).reshape(rows, cols // Q8_0_BLOCK_LEN, _BLOCK_BYTES)
    scales = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    levels = np.ascontiguousarray(blocks[..., 2:]).view(np.int8).reshape(rows, cols)
    return levels, scales
