"""Prefix-cache keys for image positions.

The radix tree indexes token ids, and every position of an image holds the same image-token
id, so keyed by ids alone two different images would share KV. Instead the positions of an image
are keyed by ids derived from a sha256 of its pixels: position `j` takes 31 bits of the digest's
32-bit word `j mod 8`, offset past the vocabulary, so no key equals a real token and two images
share keys only when all eight words agree (for images of 8 or more tokens). These keys go to
the prefix index only; the model is always fed the image-token id.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

_NUM_WORDS = 8
_KEY_LIMIT = 2**31 - 1  # the tree stores non-negative int32 ids


def pixel_digest(pixel_values: torch.Tensor, extra: tuple[int, ...] = ()) -> bytes:
    """sha256 of the preprocessed pixels, their shape and `extra` (what else the features
    depend on): equal digests, equal features."""
    values = pixel_values.detach().to("cpu", torch.float32).contiguous()
    digest = hashlib.sha256(repr((tuple(values.shape), tuple(extra))).encode())
    digest.update(values.numpy().tobytes())
    return digest.digest()


def image_cache_keys(digest: bytes, num_tokens: int, vocab_size: int) -> np.ndarray:
    """int32 keys for an image's `num_tokens` positions, all in `[vocab_size, 2**31 - 1)`."""
    span = _KEY_LIMIT - vocab_size
    words = np.frombuffer(digest[: 4 * _NUM_WORDS], dtype=">u4").astype(np.int64)
    keys = vocab_size + words % span
    return keys[np.arange(num_tokens) % _NUM_WORDS].astype(np.int32)
