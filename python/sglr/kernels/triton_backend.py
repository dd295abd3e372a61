"""Triton attention backend: store-KV + extend or split-KV decode kernels over the paged pool."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.kv_pool import PagedKVPool
from sglr.kernels.triton_decode import decode_attention
from sglr.kernels.triton_extend import extend_attention
from sglr.kernels.triton_store_kv import store_kv


class TritonAttentionBackend(AttentionBackend):
    name = "triton"
    # Decode launches depend only on the batch size; lengths are read from device memory.
    supports_cuda_graph = True
    # Extend launches depend only on the longest extend; empty requests' programs exit at once.
    supports_cuda_graph_extend = True
    supports_sliding_window = True
    supports_logit_softcap = True

    def __init__(
        self,
        kv_pool: PagedKVPool,
        req_to_token: torch.Tensor,
        scale: float,
        layer_variants: Sequence[AttentionVariant] = (),
        num_kv_splits: int | None = None,
    ) -> None:
        super().__init__(kv_pool, req_to_token, scale, layer_variants)
        self.num_kv_splits = num_kv_splits
        self._max_extend_len = 0

    def begin(self, metadata: AttentionMetadata) -> None:
        super().begin(metadata)
        # Host value: reading it from the device tensor would synchronize.
        self._max_extend_len = 1 if metadata.is_decode else metadata.max_extend_len

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        metadata = self.metadata
        variant = self.variant(layer_id)
        k_cache = self.kv_pool.k_cache(layer_id)
        v_cache = self.kv_pool.v_cache(layer_id)
        # Kernels take token and head strides; only the head dim must be contiguous.
        q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
        store_kv(k, v, k_cache, v_cache, metadata.out_cache_slots)
        if metadata.is_decode:
            return decode_attention(
                q,
                k_cache,
                v_cache,
                self.req_to_token,
                metadata.req_rows,
                metadata.seq_lens,
                variant.scale,
                num_kv_splits=self.num_kv_splits,
                sliding_window=variant.sliding_window,
                logit_softcap=variant.logit_softcap,
            )
        return extend_attention(
            q,
            k,
            v,
            k_cache,
            v_cache,
            self.req_to_token,
            metadata.req_rows,
            metadata.prefix_lens,
            metadata.extend_lens,
            metadata.extend_starts,
            self._max_extend_len,
            variant.scale,
            sliding_window=variant.sliding_window,
            logit_softcap=variant.logit_softcap,
        )
