"""Triton attention backend: store-KV + extend or split-KV decode kernels over the paged pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from sglr.kernels.triton_decode import DEFAULT_NUM_KV_SPLITS, decode_attention
from sglr.kernels.triton_extend import extend_attention
from sglr.kernels.triton_store_kv import store_kv

if TYPE_CHECKING:
    from sglr.model.forward_batch import ForwardBatch
    from sglr.model.kv_cache import KVCache


class TritonAttentionBackend:
    name = "triton"
    # Decode launches depend only on the batch size; lengths are read from device memory.
    supports_cuda_graph = True

    def __init__(
        self,
        kv_cache: KVCache,
        req_to_token: torch.Tensor,
        scale: float,
        num_kv_splits: int = DEFAULT_NUM_KV_SPLITS,
    ) -> None:
        self.kv_cache = kv_cache
        self.req_to_token = req_to_token
        self.scale = scale
        self.num_kv_splits = num_kv_splits
        self._batch: ForwardBatch | None = None
        self._is_decode = False
        self._max_extend_len = 0

    def begin(self, batch: ForwardBatch) -> None:
        from sglr.model.forward_batch import ForwardMode

        self._batch = batch
        self._is_decode = batch.mode is ForwardMode.DECODE
        # Host value: reading it from the device tensor would synchronize.
        self._max_extend_len = 1 if self._is_decode else batch.max_extend_len

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch = self._batch
        assert batch is not None, "begin(batch) must precede forward"
        k_cache = self.kv_cache.k_cache(layer_id)
        v_cache = self.kv_cache.v_cache(layer_id)
        # Kernels take token and head strides; only the head dim must be contiguous.
        q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
        store_kv(k, v, k_cache, v_cache, batch.out_cache_slots)
        if self._is_decode:
            return decode_attention(
                q,
                k_cache,
                v_cache,
                self.req_to_token,
                batch.req_rows,
                batch.seq_lens,
                self.scale,
                num_kv_splits=self.num_kv_splits,
            )
        return extend_attention(
            q,
            k,
            v,
            k_cache,
            v_cache,
            self.req_to_token,
            batch.req_rows,
            batch.prefix_lens,
            batch.extend_lens,
            batch.extend_starts,
            self._max_extend_len,
            self.scale,
        )
