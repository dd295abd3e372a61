"""Pure-torch attention backend (CPU and GPU): pad the batch, gather KV by slot, run SDPA.

Per batch, `begin` builds index and mask tensors once: each request's queries are padded to the
longest extend and its keys to the longest sequence, and a boolean mask encodes both the
padding and causality (key position <= the query's absolute position). Every layer then only
gathers its K/V rows from the pool and calls `scaled_dot_product_attention`. Decode is the same
computation with one query per request. GQA is handled by folding the query heads that share
a KV head into the query-length axis, so K/V are never repeated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from sglr.model.forward_batch import ForwardBatch
    from sglr.model.kv_cache import KVCache


class TorchAttentionBackend:
    name = "torch"
    supports_cuda_graph = False

    def __init__(self, kv_cache: KVCache, req_to_token: torch.Tensor, scale: float) -> None:
        self.kv_cache = kv_cache
        self.req_to_token = req_to_token
        self.scale = scale
        self._batch: ForwardBatch | None = None

    def begin(self, batch: ForwardBatch) -> None:
        device = batch.input_ids.device
        max_q, max_kv = batch.max_extend_len, batch.max_seq_len
        rows = batch.req_rows.long()
        self._kv_index = self.req_to_token[rows, :max_kv].long()  # [B, S]
        q_offsets = torch.arange(max_q, device=device)
        q_valid = q_offsets[None, :] < batch.extend_lens[:, None]  # [B, M]
        q_index = batch.extend_starts[:, None].long() + q_offsets[None, :]
        self._q_index = torch.where(q_valid, q_index, 0)
        self._q_valid = q_valid
        q_pos = batch.prefix_lens[:, None].long() + q_offsets[None, :]  # [B, M]
        k_pos = torch.arange(max_kv, device=device)
        # Padded query rows may see their request's whole sequence: never an all-masked row (NaN).
        allowed = (k_pos[None, None, :] <= q_pos[:, :, None]) | ~q_valid[:, :, None]
        allowed &= k_pos[None, None, :] < batch.seq_lens[:, None, None]  # [B, M, S]
        self._mask = allowed
        self._group_mask: torch.Tensor | None = None  # [B, 1, G*M, S], built by the first layer
        self._batch = batch

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch = self._batch
        assert batch is not None, "begin(batch) must precede forward"
        self.kv_cache.store(layer_id, batch.out_cache_slots, k, v)
        _, num_heads, head_dim = q.shape
        num_kv_heads = k.shape[1]
        group = num_heads // num_kv_heads
        batch_size, max_q = self._q_index.shape
        keys = self.kv_cache.k_cache(layer_id)[self._kv_index]  # [B, S, Hkv, D]
        values = self.kv_cache.v_cache(layer_id)[self._kv_index]
        queries = q[self._q_index]  # [B, M, Hq, D]
        queries = queries.view(batch_size, max_q, num_kv_heads, group, head_dim)
        queries = queries.permute(0, 2, 3, 1, 4).reshape(batch_size, num_kv_heads, group * max_q, head_dim)
        if self._group_mask is None:
            mask = self._mask[:, None, None].expand(-1, 1, group, -1, -1)  # [B, 1, G, M, S]
            self._group_mask = mask.reshape(batch_size, 1, group * max_q, -1)
        out = F.scaled_dot_product_attention(
            queries,
            keys.transpose(1, 2).to(q.dtype),
            values.transpose(1, 2).to(q.dtype),
            attn_mask=self._group_mask,
            scale=self.scale,
        )  # [B, Hkv, G*M, D]
        out = out.view(batch_size, num_kv_heads, group, max_q, head_dim).permute(0, 3, 1, 2, 4)
        out = out.reshape(batch_size, max_q, num_heads, head_dim)  # [B, M, Hq, D]
        return out[self._q_valid]  # [T, Hq, D], request-major like the token stream
