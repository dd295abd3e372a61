"""FlashInfer attention backend (optional; CUDA only; flashinfer >= 0.2 `plan`/`run` API).

The pool is handed to FlashInfer as a paged KV cache with page size 1: the K and V buffers of
a layer, `[num_slots + 1, Hkv, D]`, viewed as `[pages, 1, Hkv, D]` (NHD layout). Per batch,
`begin` flattens each request's slot list from the req-to-token table into CSR form
(`kv_indptr`, `kv_indices`) and plans the wrappers once; all layers reuse the plan.
Extend uses the paged prefill wrapper with a causal mask (FlashInfer aligns the queries to the
end of each request's KV, i.e. after its cached prefix); decode uses the paged decode wrapper.

Not graph-captured: planning reads host-side lengths, so decode runs eagerly with this backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from sglr.model.forward_batch import ForwardBatch
    from sglr.model.kv_cache import KVCache

_WORKSPACE_BYTES = 256 * 1024 * 1024


class FlashInferAttentionBackend:
    name = "flashinfer"
    supports_cuda_graph = False

    def __init__(self, kv_cache: KVCache, req_to_token: torch.Tensor, scale: float) -> None:
        import flashinfer

        self.kv_cache = kv_cache
        self.req_to_token = req_to_token
        self.scale = scale
        device = kv_cache.device
        self._workspace = torch.empty(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self._prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(self._workspace, "NHD")
        self._decode_factory = flashinfer.BatchDecodeWithPagedKVCacheWrapper
        self._decode = None
        self._is_decode = False

    def _decode_wrapper(self, group: int) -> Any:
        if self._decode is None:
            # Tensor cores pay off once several query heads share a KV head.
            self._decode = self._decode_factory(self._workspace, "NHD", use_tensor_cores=group >= 4)
        return self._decode

    def begin(self, batch: ForwardBatch) -> None:
        from sglr.model.forward_batch import ForwardMode

        self._batch = batch
        self._is_decode = batch.mode is ForwardMode.DECODE
        device = self.kv_cache.device
        max_kv = batch.max_seq_len
        columns = torch.arange(max_kv, device=device)
        table = self.req_to_token[batch.req_rows.long(), :max_kv]  # [B, S]
        kv_indices = table[columns[None, :] < batch.seq_lens[:, None]].int()  # request-major, flat
        seq_lens = batch.seq_lens.int()
        kv_indptr = torch.zeros(batch.batch_size + 1, dtype=torch.int32, device=device)
        kv_indptr[1:] = torch.cumsum(seq_lens, dim=0)
        last_page_len = torch.ones(batch.batch_size, dtype=torch.int32, device=device)
        self._plan_args = (kv_indptr, kv_indices, last_page_len)
        self._planned = False

    def _plan(self, num_q_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        kv_indptr, kv_indices, last_page_len = self._plan_args
        kv_dtype = self.kv_cache.dtype
        if self._is_decode:
            self._decode_wrapper(num_q_heads // num_kv_heads).plan(
                kv_indptr, kv_indices, last_page_len, num_q_heads, num_kv_heads, head_dim, 1,
                pos_encoding_mode="NONE", sm_scale=self.scale, q_data_type=dtype, kv_data_type=kv_dtype,
            )  # fmt: skip
        else:
            batch = self._batch
            qo_indptr = torch.zeros(batch.batch_size + 1, dtype=torch.int32, device=kv_indptr.device)
            qo_indptr[1:] = torch.cumsum(batch.extend_lens.int(), dim=0)
            self._prefill.plan(
                qo_indptr, kv_indptr, kv_indices, last_page_len, num_q_heads, num_kv_heads, head_dim, 1,
                causal=True, sm_scale=self.scale, q_data_type=dtype, kv_data_type=kv_dtype,
            )  # fmt: skip
        self._planned = True

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self.kv_cache.store(layer_id, self._batch.out_cache_slots, k, v)
        if not self._planned:
            self._plan(q.shape[1], k.shape[1], q.shape[2], q.dtype)
        paged = (
            self.kv_cache.k_cache(layer_id).unsqueeze(1),  # [pages, page_size=1, Hkv, D]
            self.kv_cache.v_cache(layer_id).unsqueeze(1),
        )
        if self._is_decode:
            return self._decode_wrapper(q.shape[1] // k.shape[1]).run(q.contiguous(), paged)
        return self._prefill.run(q.contiguous(), paged)
