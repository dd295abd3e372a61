"""A plain quantizer to GGUF's K-quant formats (Q4_K, Q5_K, Q6_K), which the `gguf` package reads
but does not write: per block a min/max fit (not llama.cpp's search), packed in the file's byte
layout. Tests check its bytes through `gguf.quants.dequantize`, an independent reader."""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

T = GGMLQuantizationType
K_TYPES = (T.Q4_K, T.Q5_K, T.Q6_K)
SUPER_LEN = 256


def _safe_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape, dtype=np.float32), where=b > 0)


def _f16_bytes(values: np.ndarray) -> np.ndarray:
    """`[..., ]` float -> `[..., 2]` uint8 little-endian fp16."""
    return values.astype("<f2").view(np.uint8).reshape(*values.shape, 2)


def quantize_k(values: np.ndarray, ggml_type: GGMLQuantizationType) -> np.ndarray:
    """`[rows, cols]` float (cols a multiple of 256) -> `[rows, bytes_per_row]` uint8 blocks."""
    rows, cols = values.shape
    if cols % SUPER_LEN:
        raise ValueError(f"K-quants need columns in multiples of {SUPER_LEN}, got {cols}")
    x = values.astype(np.float32).reshape(rows, cols // SUPER_LEN, SUPER_LEN)
    if ggml_type == T.Q6_K:
        return _q6_k(x).reshape(rows, -1)
    if ggml_type in (T.Q4_K, T.Q5_K):
        return _q4_k_or_q5_k(x, five=ggml_type == T.Q5_K).reshape(rows, -1)
    raise ValueError(f"not a K-quant type: {ggml_type!r}")


def _q4_k_or_q5_k(x: np.ndarray, five: bool) -> np.ndarray:
    top = 31 if five else 15
    blocks = x.reshape(*x.shape[:2], 8, 32)
    low = np.minimum(blocks.min(-1), 0.0)
    scale, minimum = (blocks.max(-1) - low) / top, -low  # both >= 0
    d = (scale.max(-1) / 63).astype(np.float16).astype(np.float32)
    dmin = (minimum.max(-1) / 63).astype(np.float16).astype(np.float32)
    sc = np.clip(np.round(_safe_divide(scale, d[..., None])), 0, 63).astype(np.uint8)
    m = np.clip(np.round(_safe_divide(minimum, dmin[..., None])), 0, 63).astype(np.uint8)
    step = (d[..., None] * sc)[..., None]
    offset = (dmin[..., None] * m)[..., None]
    q = np.clip(np.round(_safe_divide(blocks + offset, step)), 0, top).astype(np.uint8)
    packed_scales = np.concatenate(
        [
            sc[..., :4] | ((sc[..., 4:] >> 4) << 6),
            m[..., :4] | ((m[..., 4:] >> 4) << 6),
            (sc[..., 4:] & 15) | ((m[..., 4:] & 15) << 4),
        ],
        axis=-1,
    )
    nibbles = q & 15
    # Run c of 32 bytes: block 2c in the low nibbles, block 2c + 1 in the high ones.
    qs = (nibbles[..., 0::2, :] | (nibbles[..., 1::2, :] << 4)).reshape(*x.shape[:2], 128)
    parts = [_f16_bytes(d), _f16_bytes(dmin), packed_scales]
    if five:
        fifth = (q >> 4) & 1  # [..., 8 blocks, 32]
        qh = np.zeros((*x.shape[:2], 32), dtype=np.uint8)
        for b in range(8):
            qh |= fifth[..., b, :] << b
        parts.append(qh)
    parts.append(qs)
    return np.concatenate(parts, axis=-1)


def _q6_k(x: np.ndarray) -> np.ndarray:
    groups = x.reshape(*x.shape[:2], 16, 16)
    scale = np.abs(groups).max(-1) / 31
    d = (scale.max(-1) / 127).astype(np.float16).astype(np.float32)
    sc = np.clip(np.round(_safe_divide(scale, d[..., None])), 0, 127).astype(np.int8)
    step = (d[..., None] * sc)[..., None]
    q = (np.clip(np.round(_safe_divide(groups, step)), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(*x.shape[:2], 2, 4, 32)  # [..., half, block, weight]
    low = q & 15
    ql = np.concatenate(
        [
            low[..., 0, :] | (low[..., 2, :] << 4),  # bytes 0-31 of a half: blocks 0 and 2
            low[..., 1, :] | (low[..., 3, :] << 4),  # bytes 32-63: blocks 1 and 3
        ],
        axis=-1,
    ).reshape(*x.shape[:2], 128)
    top = q >> 4
    qh = (top[..., 0, :] | (top[..., 1, :] << 2) | (top[..., 2, :] << 4) | (top[..., 3, :] << 6)).reshape(
        *x.shape[:2], 64
    )
    return np.concatenate([ql, qh, sc.view(np.uint8), _f16_bytes(d)], axis=-1)
