"""Keys of stored KV pages: a hash chain over token ids, seeded by everything that changes KV.

Page `i` of a sequence holds the KV of tokens `[i * page_size, (i + 1) * page_size)`; its key
hashes the previous page's key with its own token ids, so a key names the whole prefix up to the
page's end (the KV of a token depends on every token before it). The chain starts from the
namespace seed: the model's weights fingerprint, the KV dtype and shape, the tensor-parallel
layout, and the request's cache namespace (its adapter, `Req.cache_namespace`). Image positions
are already keyed by image content in the token keys (`Req.fill_keys`).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import numpy as np

KEY_BYTES = 16
_ADAPTER_MARK = "\x00lora:"  # in `Req.cache_namespace`


def weights_fingerprint(
    model: Any, kv_dtype: Any, kv_shape: tuple[int, ...], tp_rank: int, tp_size: int
) -> bytes:
    """A digest of the weights (names, shapes, dtypes and a strided sample of values of every
    parameter and buffer) and of the KV layout: two models share pages only when these agree."""
    digest = hashlib.blake2b(digest_size=KEY_BYTES)
    digest.update(repr((str(kv_dtype), tuple(kv_shape), tp_rank, tp_size)).encode())
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, tensor in sorted(tensors, key=lambda item: item[0]):
        digest.update(repr((name, tuple(tensor.shape), str(tensor.dtype))).encode())
        flat = tensor.detach().reshape(-1)
        if flat.numel():
            step = max(1, flat.numel() // 64)
            sample = flat[::step][:64].float().cpu().numpy()
            digest.update(sample.tobytes())
    return digest.digest()


def namespace_seed(fingerprint: bytes, namespace: str | None) -> bytes:
    digest = hashlib.blake2b(fingerprint, digest_size=KEY_BYTES, person=b"sglr-kv-ns")
    digest.update(b"\x01" + namespace.encode() if namespace is not None else b"\x00")
    return digest.digest()


def page_keys(seed: bytes, token_ids: np.ndarray, page_size: int) -> list[str]:
    """Hex keys of the whole pages of `token_ids` (a trailing partial page has none)."""
    tokens = np.asarray(token_ids, dtype=np.int64)
    keys = []
    previous = seed
    for start in range(0, tokens.size - page_size + 1, page_size):
        digest = hashlib.blake2b(previous, digest_size=KEY_BYTES, person=b"sglr-kv-page")
        digest.update(tokens[start : start + page_size].tobytes())
        previous = digest.digest()
        keys.append(previous.hex())
    return keys


class NamespaceSeeds:
    """The seeds of one fingerprint, by cache namespace (each hashed once)."""

    def __init__(self, fingerprint: bytes) -> None:
        self._fingerprint = fingerprint
        self._seeds: dict[str | None, bytes] = {}
        self._process_nonce = "\x00process:" + secrets.token_hex(16)

    def of(self, namespace: str | None) -> bytes:
        seed = self._seeds.get(namespace)
        if seed is None:
            keyed = namespace
            if namespace is not None and _ADAPTER_MARK in namespace:
                # Adapter ids name adapters only within this process (a restart may give the id
                # to another adapter): such pages are this process's alone.
                keyed = namespace + self._process_nonce
            seed = self._seeds[namespace] = namespace_seed(self._fingerprint, keyed)
        return seed
