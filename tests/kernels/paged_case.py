"""Random paged-attention cases: requests scattered over a KV pool, as the runner lays them out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sglr.model.forward_batch import ExtendRequest, ForwardBatch
from sglr.model.kv_cache import KVCache, KVCacheShape


@dataclass
class PagedCase:
    batch: ForwardBatch
    kv_cache: KVCache
    table: torch.Tensor
    q: torch.Tensor  # [T, Hq, D]
    k: torch.Tensor  # [T, Hkv, D]
    v: torch.Tensor
    scale: float

    def store_new_kv(self) -> None:
        self.kv_cache.store(0, self.batch.out_cache_slots, self.k, self.v)


def make_case(
    prefix_lens: list[int],
    extend_lens: list[int],
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    decode: bool = False,
    device: str = "cpu",
    consecutive_slots: bool = False,
) -> PagedCase:
    """Each request gets shuffled (non-contiguous) slots, or with `consecutive_slots` the next
    ones in order, and a random table row; the cache holds random K/V for every prefix token.
    With `decode`, every extend length must be 1."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    seq_lens = [p + e for p, e in zip(prefix_lens, extend_lens, strict=True)]
    num_slots = sum(seq_lens) + 7
    max_context = max(seq_lens) + 5
    shape = KVCacheShape(1, num_kv_heads, head_dim, dtype)
    kv_cache = KVCache(shape, num_slots, device)
    kv_cache.k_buffer.copy_(torch.randn(kv_cache.k_buffer.shape, generator=gen).to(dtype))
    kv_cache.v_buffer.copy_(torch.randn(kv_cache.v_buffer.shape, generator=gen).to(dtype))
    table = torch.zeros((len(seq_lens) + 3, max_context), dtype=torch.int32, device=device)
    slots = np.arange(3, num_slots + 1) if consecutive_slots else rng.permutation(np.arange(1, num_slots + 1))
    rows = rng.permutation(np.arange(1, len(seq_lens) + 3))[: len(seq_lens)]
    requests, offset = [], 0
    for row, prefix_len, extend_len in zip(rows, prefix_lens, extend_lens, strict=True):
        own = slots[offset : offset + prefix_len + extend_len].astype(np.int32)
        offset += prefix_len + extend_len
        requests.append(
            ExtendRequest(int(row), np.zeros(extend_len, np.int64), own[:prefix_len], own[prefix_len:])
        )
    if decode:
        batch = ForwardBatch.decode(
            [r.row for r in requests],
            [0] * len(requests),
            seq_lens,
            [r.new_slots[0] for r in requests],
            device,
        )
        for r in requests:
            table[r.row, : r.seq_len] = torch.from_numpy(np.concatenate((r.prefix_slots, r.new_slots)))
    else:
        batch = ForwardBatch.extend(requests, device)
        table[batch.table_rows, batch.table_cols] = batch.table_slots.int()
    num_tokens = sum(extend_lens)
    q = torch.randn((num_tokens, num_heads, head_dim), generator=gen).to(device, dtype)
    k = torch.randn((num_tokens, num_kv_heads, head_dim), generator=gen).to(device, dtype)
    v = torch.randn((num_tokens, num_kv_heads, head_dim), generator=gen).to(device, dtype)
    return PagedCase(batch, kv_cache, table, q, k, v, head_dim**-0.5)
