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

from collections.abc import Sequence
from typing import Any

import torch

from sglr.errors import UnsupportedAttentionError
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.kv_pool import PagedKVPool

_WORKSPACE_BYTES = 256 * 1024 * 1024


class FlashInferAttentionBackend(AttentionBackend):
    name = "flashinfer"
    supports_cuda_graph = False

    def __init__(
        self,
        kv_pool: PagedKVPool,
        req_to_token: torch.Tensor,
        scale: float,
        layer_variants: Sequence[AttentionVariant] = (),
    ) -> None:
        # One plan serves every layer: windows and soft-caps (per layer) are refused by the base
        # class; a per-layer scale must be the same in all layers.
        super().__init__(kv_pool, req_to_token, scale, layer_variants)
        scales = {variant.scale for variant in self.layer_variants}
        if len(scales) > 1:
            raise UnsupportedAttentionError(
                "the 'flashinfer' attention backend needs one attention scale for all layers"
            )
        self.scale = scales.pop() if scales else scale
        import flashinfer

        self._workspace = torch.empty(_WORKSPACE_BYTES, dtype=torch.uint8, device=kv_pool.device)
        self._prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(self._workspace, "NHD")
        self._decode_factory = flashinfer.BatchDecodeWithPagedKVCacheWrapper
        self._decode = None

    def _decode_wrapper(self, group: int) -> Any:
        if self._decode is None:
            # Tensor cores pay off once several query heads share a KV head.
            self._decode = self._decode_factory(self._workspace, "NHD", use_tensor_cores=group >= 4)
        return self._decode

    def begin(self, metadata: AttentionMetadata) -> None:
        super().begin(metadata)
        device = self.kv_pool.device
        max_kv = metadata.max_seq_len
        columns = torch.arange(max_kv, device=device)
        table = self.req_to_token[metadata.req_rows.long(), :max_kv]  # [B, S]
        kv_indices = table[columns[None, :] < metadata.seq_lens[:, None]].int()  # request-major, flat
        seq_lens = metadata.seq_lens.int()
        kv_indptr = torch.zeros(metadata.batch_size + 1, dtype=torch.int32, device=device)
        kv_indptr[1:] = torch.cumsum(seq_lens, dim=0)
        last_page_len = torch.ones(metadata.batch_size, dtype=torch.int32, device=device)
        self._plan_args = (kv_indptr, kv_indices, last_page_len)
        self._planned = False

    def _plan(self, num_q_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        kv_indptr, kv_indices, last_page_len = self._plan_args
        kv_dtype = self.kv_pool.dtype
        metadata = self.metadata
        if metadata.is_decode:
            self._decode_wrapper(num_q_heads // num_kv_heads).plan(
                kv_indptr, kv_indices, last_page_len, num_q_heads, num_kv_heads, head_dim, 1,
                pos_encoding_mode="NONE", sm_scale=self.scale, q_data_type=dtype, kv_data_type=kv_dtype,
            )  # fmt: skip
        else:
            qo_indptr = torch.zeros(metadata.batch_size + 1, dtype=torch.int32, device=kv_indptr.device)
            qo_indptr[1:] = torch.cumsum(metadata.extend_lens.int(), dim=0)
            self._prefill.plan(
                qo_indptr, kv_indptr, kv_indices, last_page_len, num_q_heads, num_kv_heads, head_dim, 1,
                causal=True, sm_scale=self.scale, q_data_type=dtype, kv_data_type=kv_dtype,
            )  # fmt: skip
        self._planned = True

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self.kv_pool.store(layer_id, self.metadata.out_cache_slots, k, v)
        if not self._planned:
            self._plan(q.shape[1], k.shape[1], q.shape[2], q.dtype)
        paged = (
            self.kv_pool.k_cache(layer_id).unsqueeze(1),  # [pages, page_size=1, Hkv, D]
            self.kv_pool.v_cache(layer_id).unsqueeze(1),
        )
        if self.metadata.is_decode:
            return self._decode_wrapper(q.shape[1] // k.shape[1]).run(q.contiguous(), paged)
        return self._prefill.run(q.contiguous(), paged)
