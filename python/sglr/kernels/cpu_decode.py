"""CPU decode attention in one call per layer: `sglr._core.decode_attention` (rust/kernels' attn) reads
each request's K/V rows straight from the slot pool (bf16 or fp32), one query per request,
GQA by KV head, fp32 softmax, an optional sliding window.

Why: the SDPA path of `torch_backend` spends a batch-1 decode step of a small model in
gathers, dtype casts, mask building and SDPA's own setup (~87 us per SmolLM2 layer at 513 keys,
one thread; the kernel call ~39 us), while the attention arithmetic itself is tiny. The kernel
takes the slot table built once per step (`CpuDecodeBatch.build`), so a layer costs one call.

Soft-capped scores (Gemma 2) are not computed here: `supports` says whether a model's layers can
all use it, and the torch path serves the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.kv_pool import PagedKVPool
from sglr.kernels.numpy_views import BIT_VIEWS, numpy_view


def supports(kv_dtype: torch.dtype, variants: Sequence[AttentionVariant]) -> bool:
    """Whether every layer's decode attention can run in the kernel."""
    return kv_dtype in BIT_VIEWS and all(v.logit_softcap is None for v in variants)


def _rows_view(rows: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    """A step's new K or V rows `[T, Hkv, D]` as a numpy array in the cache's dtype (bits)."""
    rows = rows.detach()
    if rows.dtype != dtype:
        rows = rows.to(dtype)
    return numpy_view(rows.contiguous())


class CacheViews:
    """Each layer's K and V caches as numpy arrays sharing their memory, made once: the pool's
    tensors live as long as the runner, and a view per layer per step would cost two ops each."""

    def __init__(self, kv_pool: PagedKVPool) -> None:
        self._kv_pool = kv_pool
        self._views: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def layer(self, layer_id: int) -> tuple[np.ndarray, np.ndarray]:
        views = self._views.get(layer_id)
        if views is None:
            pool = self._kv_pool
            views = (numpy_view(pool.k_cache(layer_id)), numpy_view(pool.v_cache(layer_id)))
            self._views[layer_id] = views
        return views


@dataclass(frozen=True)
class CpuDecodeBatch:
    """One decode step's key lookup: `slot_table` int32 `[B, W]` (request b's key positions
    `0..seq_lens[b]-1` in slots), `seq_lens` int32 `[B]`, and `out_slots` int32 `[B]` where the
    step's own K/V go."""

    slot_table: np.ndarray
    seq_lens: np.ndarray
    out_slots: np.ndarray

    @classmethod
    def build(cls, req_to_token: torch.Tensor, metadata: AttentionMetadata) -> CpuDecodeBatch:
        table = req_to_token[:, : metadata.max_seq_len].index_select(0, metadata.req_rows)
        return cls(
            np.ascontiguousarray(table.numpy(), dtype=np.int32),
            np.ascontiguousarray(metadata.seq_lens_cpu, dtype=np.int32),
            np.ascontiguousarray(metadata.out_cache_slots.numpy(), dtype=np.int32),
        )

    def store_and_attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        caches: tuple[np.ndarray, np.ndarray],
        kv_dtype: torch.dtype,
        variant: AttentionVariant,
    ) -> torch.Tensor:
        """Stores the step's `k`, `v` `[B, Hkv, D]` at `out_slots` in one layer's `CacheViews`
        (dtype `kv_dtype`), then attends: q `[B, Hq, D]` -> `[B, Hq, D]` in q's dtype."""
        from sglr._core import decode_attention, store_kv_rows

        store_kv_rows(caches[0], caches[1], _rows_view(k, kv_dtype), _rows_view(v, kv_dtype), self.out_slots)

        queries = q.detach().to(torch.float32).contiguous().numpy()
        out = np.empty_like(queries)
        decode_attention(
            queries,
            caches[0],
            caches[1],
            self.slot_table,
            self.seq_lens,
            out,
            variant.scale,
            variant.sliding_window,
            torch.get_num_threads(),
        )
        return torch.from_numpy(out).to(q.dtype)
