"""One stored KV page as bytes: what it claims to be, its K and V, and a checksum of both.

Layout: magic (8 bytes), header length (u32 little-endian), a JSON header (the page key, the
namespace seed, the token ids, the tensor dtype and shape), K then V as raw bytes, and a 16-byte
BLAKE2b digest of everything before it. `decode` checks all of it against what the reader
expects, so a truncated, corrupted or foreign file is refused (`CorruptPageError`), never read
as KV. Files are written to a temporary name and renamed (`write_atomic`): a reader, or a
restart after a crash mid-write, sees the whole page or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass

import numpy as np
import torch

from sglr.errors import CorruptPageError

MAGIC = b"SGLRKV01"
DIGEST_BYTES = 16
TMP_MARK = ".tmp."
_LEN = struct.Struct("<I")


@dataclass(frozen=True)
class PageData:
    """K and V of one page, `[num_layers, page_size, num_kv_heads, head_dim]` on the CPU."""

    k: torch.Tensor
    v: torch.Tensor

    @property
    def num_bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


def encode(key: str, seed: bytes, token_ids: np.ndarray, page: PageData) -> bytes:
    header = json.dumps(
        {
            "key": key,
            "seed": seed.hex(),
            "tokens": [int(t) for t in token_ids],
            "dtype": str(page.k.dtype),
            "shape": list(page.k.shape),
        }
    ).encode()
    body = b"".join((MAGIC, _LEN.pack(len(header)), header, _raw(page.k), _raw(page.v)))
    return body + hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest()


def decode(
    data: bytes, key: str, seed: bytes, token_ids: np.ndarray, dtype: torch.dtype, shape: tuple[int, ...]
) -> PageData:
    """The page in `data`, or `CorruptPageError` saying what is wrong with it."""
    if len(data) < len(MAGIC) + _LEN.size + DIGEST_BYTES or not data.startswith(MAGIC):
        raise CorruptPageError(f"page {key}: truncated or not a KV page")
    body, digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    if hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() != digest:
        raise CorruptPageError(f"page {key}: checksum mismatch (truncated or corrupted)")
    (header_len,) = _LEN.unpack_from(body, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    try:
        header = json.loads(body[start : start + header_len])
    except ValueError:
        raise CorruptPageError(f"page {key}: unreadable header") from None
    if not isinstance(header, dict):
        raise CorruptPageError(f"page {key}: unreadable header")
    expected = (key, seed.hex(), [int(t) for t in token_ids], str(dtype), list(shape))
    found = (
        header.get("key"),
        header.get("seed"),
        header.get("tokens"),
        header.get("dtype"),
        header.get("shape"),
    )
    if found != expected:
        raise CorruptPageError(f"page {key}: written for another prefix, model or KV layout")
    payload = memoryview(body)[start + header_len :]
    num_bytes = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
    if len(payload) != 2 * num_bytes:
        raise CorruptPageError(f"page {key}: {len(payload)} payload bytes, expected {2 * num_bytes}")
    k = _tensor(payload[:num_bytes], dtype, shape)
    v = _tensor(payload[num_bytes:], dtype, shape)
    return PageData(k, v)


def write_atomic(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file in the same directory and a rename."""
    tmp = f"{path}{TMP_MARK}{os.getpid()}"
    with open(tmp, "wb") as file:
        file.write(data)
    os.replace(tmp, path)


def _raw(tensor: torch.Tensor) -> bytes:
    # Through an integer view: numpy has no bfloat16.
    as_bits = tensor.contiguous().view(torch.uint8)
    return as_bits.numpy().tobytes()


def _tensor(raw: memoryview, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    as_bits = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return as_bits.view(dtype).view(shape)
