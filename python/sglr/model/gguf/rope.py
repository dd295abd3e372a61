"""RoPE scaling from GGUF metadata and from llama.cpp's precomputed frequency factors.

Llama 3.1+ checkpoints scale RoPE frequencies with four parameters that GGUF does not store:
llama.cpp keeps only the resulting per-frequency divisors (the `rope_freqs` tensor). Hugging Face
configs need the parameters, so we recover them by matching the divisors against the Llama 3
formula over the parameter values Meta's releases use, and refuse a file that matches none.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sglr.errors import GGUFUnsupportedError

# (low_freq_factor, high_freq_factor, original_max_position_embeddings) tried in order; the
# factor itself is the largest divisor.
_LLAMA3_CANDIDATES = tuple(
    (low, high, original)
    for original in (8192, 4096, 2048, 16384, 32768, 65536, 131072)
    for low, high in ((1.0, 4.0), (1.0, 2.0), (1.0, 8.0), (2.0, 4.0))
)


def llama3_freq_divisors(
    rope_theta: float, rotary_dim: int, factor: float, low: float, high: float, original: int
) -> np.ndarray:
    """Per-frequency divisors of the Llama 3 RoPE scaling (what llama.cpp stores as `rope_freqs`)."""
    inv_freq = 1.0 / rope_theta ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    wavelen = 2 * math.pi / inv_freq
    smooth = (original / wavelen - low) / (high - low)
    medium = 1.0 / ((1 - smooth) / factor + smooth)
    divisors = np.where(wavelen > original / low, factor, medium)
    return np.where(wavelen < original / high, 1.0, divisors)


def llama3_rope_scaling(freq_divisors: np.ndarray, rope_theta: float, rotary_dim: int) -> dict[str, Any]:
    """The Hugging Face `rope_scaling` entry that reproduces `freq_divisors`."""
    divisors = np.asarray(freq_divisors, dtype=np.float64).reshape(-1)
    if divisors.shape[0] != rotary_dim // 2:
        raise GGUFUnsupportedError(
            f"rope_freqs has {divisors.shape[0]} entries, expected {rotary_dim // 2} (rotary dim {rotary_dim})"
        )
    factor = float(divisors.max())
    if factor <= 1.0:
        return {}
    for low, high, original in _LLAMA3_CANDIDATES:
        expected = llama3_freq_divisors(rope_theta, rotary_dim, factor, low, high, original)
        if np.allclose(divisors, expected, rtol=1e-4, atol=1e-6):
            return {
                "rope_type": "llama3",
                "factor": round(factor, 6),
                "low_freq_factor": low,
                "high_freq_factor": high,
                "original_max_position_embeddings": original,
            }
    raise GGUFUnsupportedError(
        "the rope_freqs tensor matches no Llama 3 RoPE scaling sglr knows; "
        f"largest divisor {factor:g}, rotary dim {rotary_dim}"
    )


def metadata_rope_scaling(
    scaling_type: str | None, factor: float | None, original: int | None
) -> dict[str, Any]:
    """`rope_scaling` from the `{arch}.rope.scaling.*` keys ({} for none)."""
    if scaling_type in (None, "none") or factor in (None, 1.0):
        return {}
    if scaling_type == "linear":
        return {"rope_type": "linear", "factor": float(factor)}
    if scaling_type == "yarn":
        scaling: dict[str, Any] = {"rope_type": "yarn", "factor": float(factor)}
        if original:
            scaling["original_max_position_embeddings"] = int(original)
        return scaling
    raise GGUFUnsupportedError(
        f"RoPE scaling type {scaling_type!r} is not supported (supported: linear, yarn)"
    )
