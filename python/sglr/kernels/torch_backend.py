"""Pure-torch attention backend (CPU and GPU): pad, gather KV by slot, run SDPA.

Per batch, `begin` builds index and mask tensors once; every layer then only gathers its K/V
rows from the pool and calls `scaled_dot_product_attention`. A lone request whose slots are
consecutive (the usual case for batch-1 decode: the slot allocator hands out ascending ids) reads
its K/V as a slice of the cache instead, without a gather per layer (CPU only: the check reads
the slot ids on the host). Requests are padded to a common
query length (the longest extend) and key length (the longest sequence); a boolean mask
encodes both the padding and causality (key position <= the query's absolute position).
Decode is the same computation with one query per request.

Ragged batches waste work on padding, so requests are split into groups by their padded cost
(`partition_by_padding`), each padded only to its own longest member. GQA is handled by folding the query heads
that share a KV head into the query-length axis, so K/V are never repeated.

Decode on the CPU (fp32 or bf16 KV, no soft-capped layer) skips all of that: each layer is one
call of the Rust decode kernel over a slot table built once per step (`cpu_decode.py`);
`use_cpu_decode_kernel = False` turns it off (benchmarks compare the two).

Layer variants: a sliding window narrows the boolean mask (one additive mask per distinct
window, built by the first layer that needs it); soft-capped scores cannot go through SDPA, so
those layers compute the softmax explicitly (fp32, as transformers' eager attention does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from sglr.kernels import cpu_decode
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.fp8_linear import FP8_DTYPE

# A group costs a few op launches whatever its size: about this many query x key cells of
# attention work. A request starts a new group when joining the current one would pad it to
# more than twice its real work plus that overhead.
_GROUP_OVERHEAD_CELLS = 1 << 18
_MAX_PADDING_FACTOR = 2


def partition_by_padding(extend_lens: np.ndarray, seq_lens: np.ndarray) -> list[np.ndarray]:
    """Splits requests into groups that are cheap to pad together: longest queries first, a
    new group whenever the padded cost `size x max_q x max_kv` would outgrow the real cost
    `sum(q x kv)` by more than `_MAX_PADDING_FACTOR` (plus one group's overhead)."""
    order = np.lexsort((-seq_lens, -extend_lens))
    groups: list[list[int]] = []
    current: list[int] = []
    max_q = max_kv = real = 0
    for i in order:
        q, kv = int(extend_lens[i]), int(seq_lens[i])
        grown_q, grown_kv = max(max_q, q), max(max_kv, kv)
        padded = (len(current) + 1) * grown_q * grown_kv
        if current and padded > _MAX_PADDING_FACTOR * (real + q * kv) + _GROUP_OVERHEAD_CELLS:
            groups.append(current)
            current, real, grown_q, grown_kv = [], 0, q, kv
        current.append(int(i))
        max_q, max_kv, real = grown_q, grown_kv, real + q * kv
    groups.append(current)
    return [np.array(g, dtype=np.int64) for g in groups]


@dataclass
class _Group:
    """Requests attended together, padded to `max_q` queries and `kv_index.shape[1]` keys."""

    kv_index: torch.Tensor  # [g, S] slot of each key position
    mask: torch.Tensor  # [g, M, S] bool, True = attend (causal and padding; no window)
    q_pos: torch.Tensor  # [g, M] absolute position of each (padded) query
    q_valid: torch.Tensor  # [g, M] bool, False for padding rows
    q_index: torch.Tensor  # [g, M] token of each (padded) query position
    token_index: torch.Tensor | None  # [n] tokens of this group, in padded-layout order; None = all, in order
    valid_index: torch.Tensor | None  # [n] rows of the padded [g * M] output that are real tokens
    max_q: int
    # window (None = none) -> [g, 1, G * M, S], built by the first layer with that window
    additive_masks: dict[int | None, torch.Tensor] = field(default_factory=dict)
    # A lone fresh prompt: plain causal attention, no mask tensors at all.
    plain_causal: bool = False
    # A lone request whose slots are consecutive: its first slot (K/V are then a view of the
    # cache, not a gather per layer); None otherwise.
    kv_start: int | None = None

    def window_mask(self, window: int | None) -> torch.Tensor:
        """`mask` narrowed to the last `window` keys of each real query."""
        if window is None:
            return self.mask
        k_pos = torch.arange(self.kv_index.shape[1], device=self.mask.device)
        in_window = k_pos[None, None, :] > self.q_pos[:, :, None] - window
        # Padding rows keep their keys: an all-masked row would be NaN (and is discarded anyway).
        return self.mask & (in_window | ~self.q_valid[:, :, None])


class TorchAttentionBackend(AttentionBackend):
    name = "torch"
    supports_cuda_graph = False
    supports_sliding_window = True
    supports_logit_softcap = True
    _groups: list[_Group]
    _cpu_decode: cpu_decode.CpuDecodeBatch | None = None
    _cache_views: cpu_decode.CacheViews | None = None
    _kernel_supported: bool | None = None
    _kv_scales: tuple[float, float] | None = None
    use_cpu_decode_kernel = True

    def begin(self, metadata: AttentionMetadata) -> None:
        super().begin(metadata)
        self._is_decode = metadata.is_decode
        self._cpu_decode = None
        if self._is_decode and self._kernel_decodes(metadata):
            self._cpu_decode = cpu_decode.CpuDecodeBatch.build(self.req_to_token, metadata)
            self._groups = []
            return
        parts = partition_by_padding(metadata.extend_lens_cpu, metadata.seq_lens_cpu)
        if len(parts) == 1:
            self._groups = [self._make_group(metadata, None)]
        else:
            self._groups = [self._make_group(metadata, part) for part in parts]

    def _kernel_decodes(self, metadata: AttentionMetadata) -> bool:
        if not self.use_cpu_decode_kernel or metadata.req_rows.device.type != "cpu":
            return False
        if self._kernel_supported is None:  # fixed by the pool's dtype and the layers: once
            self._kernel_supported = cpu_decode.supports(self.kv_pool.dtype, self.layer_variants)
        return self._kernel_supported

    def _make_group(self, metadata: AttentionMetadata, requests: np.ndarray | None) -> _Group:
        device = metadata.req_rows.device
        if requests is None:
            index = None
            rows, seq_lens, prefix_lens = metadata.req_rows, metadata.seq_lens, metadata.prefix_lens
            extend_lens, extend_starts = metadata.extend_lens, metadata.extend_starts
            max_kv, max_q = metadata.max_seq_len, metadata.max_extend_len
        else:
            index = torch.from_numpy(requests).to(device)
            rows, seq_lens = metadata.req_rows[index], metadata.seq_lens[index]
            prefix_lens, extend_lens = metadata.prefix_lens[index], metadata.extend_lens[index]
            extend_starts = metadata.extend_starts[index]
            max_kv = int(metadata.seq_lens_cpu[requests].max())
            max_q = int(metadata.extend_lens_cpu[requests].max())
        kv_index = self.req_to_token[:, :max_kv].index_select(0, rows).long()  # [g, S]
        # A host check (CPU only: on a GPU it would wait for the device).
        on_cpu = kv_index.device.type == "cpu"
        kv_start = _consecutive_start(kv_index) if on_cpu and kv_index.shape[0] == 1 else None
        if not self._is_decode and metadata.batch_size == 1 and metadata.prefix_lens_cpu[0] == 0:
            empty = torch.empty(0, device=device)
            return _Group(
                kv_index, empty, empty, empty, empty, None, None, max_q, plain_causal=True, kv_start=kv_start
            )
        k_pos = torch.arange(max_kv, device=device)
        if self._is_decode:
            # One query per request, at its last position: only the padding needs masking.
            mask = (k_pos[None, :] < seq_lens[:, None])[:, None, :]  # [g, 1, S]
            q_pos = seq_lens[:, None] - 1
            q_valid = torch.ones_like(q_pos, dtype=torch.bool)
            return _Group(
                kv_index, mask, q_pos, q_valid, extend_starts[:, None], index, None, 1, kv_start=kv_start
            )
        q_offsets = torch.arange(max_q, device=device)
        q_valid = q_offsets[None, :] < extend_lens[:, None]  # [g, M]
        q_index = torch.where(q_valid, extend_starts[:, None] + q_offsets[None, :], 0)
        valid_index = torch.nonzero(q_valid.flatten()).flatten()
        q_pos = prefix_lens[:, None] + q_offsets[None, :]  # [g, M]
        # Padded query rows may see their request's whole sequence: never an all-masked row (NaN).
        mask = (k_pos[None, None, :] <= q_pos[:, :, None]) | ~q_valid[:, :, None]
        mask &= k_pos[None, None, :] < seq_lens[:, None, None]  # [g, M, S]
        token_index = None if requests is None else q_index.flatten().index_select(0, valid_index)
        return _Group(
            kv_index, mask, q_pos, q_valid, q_index, token_index, valid_index, max_q, kv_start=kv_start
        )

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self._cpu_decode is not None:
            if self._cache_views is None:
                self._cache_views = cpu_decode.CacheViews(self.kv_pool)
            caches = self._cache_views.layer(layer_id)
            return self._cpu_decode.store_and_attend(
                q, k, v, caches, self.kv_pool.dtype, self.variant(layer_id)
            )
        self.kv_pool.store(layer_id, self.metadata.out_cache_slots, k, v)
        # An fp8 pool's rows are dequantized after the gather: scaled, in the query's dtype.
        self._kv_scales = self.kv_pool.scales(layer_id) if self.kv_pool.dtype == FP8_DTYPE else None
        k_rows = self.kv_pool.k_cache(layer_id).flatten(1)  # [slots, Hkv * D]
        v_rows = self.kv_pool.v_cache(layer_id).flatten(1)
        variant = self.variant(layer_id)
        if len(self._groups) == 1:
            return self._attend(self._groups[0], variant, q, k.shape[1], k_rows, v_rows, whole_batch=True)
        out = torch.empty_like(q)
        for group in self._groups:
            assert group.token_index is not None
            out.index_copy_(0, group.token_index, self._attend(group, variant, q, k.shape[1], k_rows, v_rows))
        return out

    def _attend(
        self,
        group: _Group,
        variant: AttentionVariant,
        q: torch.Tensor,
        num_kv_heads: int,
        k_rows: torch.Tensor,
        v_rows: torch.Tensor,
        whole_batch: bool = False,
    ) -> torch.Tensor:
        """Attention for one group -> `[n, Hq, D]`, its tokens in `token_index` order."""
        num_tokens, num_heads, head_dim = q.shape
        group_size, max_kv = group.kv_index.shape
        heads_per_kv = num_heads // num_kv_heads
        max_q = group.max_q
        if group.kv_start is not None:
            keys = k_rows.narrow(0, group.kv_start, max_kv).view(1, max_kv, num_kv_heads, head_dim)
            values = v_rows.narrow(0, group.kv_start, max_kv).view(1, max_kv, num_kv_heads, head_dim)
        else:
            # `embedding` is a plain row gather, several times faster than advanced indexing on CPU.
            keys = F.embedding(group.kv_index, k_rows).view(group_size, max_kv, num_kv_heads, head_dim)
            values = F.embedding(group.kv_index, v_rows).view(group_size, max_kv, num_kv_heads, head_dim)
        if self._kv_scales is not None:
            keys = keys.to(q.dtype) * self._kv_scales[0]
            values = values.to(q.dtype) * self._kv_scales[1]
        if group.plain_causal:
            return self._attend_causal(q, keys[0].to(q.dtype), values[0].to(q.dtype), variant)
        if self._is_decode:
            rows = q if whole_batch else q.index_select(0, group.q_index.flatten())
            queries = rows.view(group_size, num_kv_heads, heads_per_kv, head_dim)  # no padding, no permute
        else:
            queries = F.embedding(group.q_index, q.reshape(num_tokens, -1))  # [g, M, Hq * D]
            queries = queries.view(group_size, max_q, num_kv_heads, heads_per_kv, head_dim).permute(
                0, 2, 3, 1, 4
            )
            queries = queries.reshape(group_size, num_kv_heads, heads_per_kv * max_q, head_dim)
        window = variant.sliding_window
        additive_mask = group.additive_masks.get(window)
        if additive_mask is None:
            # An additive float mask, built once per batch: SDPA would otherwise convert a
            # boolean mask in every layer.
            mask = group.window_mask(window)
            additive = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
            additive.masked_fill_(~mask, float("-inf"))
            expanded = additive[:, None, None].expand(-1, 1, heads_per_kv, -1, -1)  # [g, 1, G, M, S]
            additive_mask = expanded.reshape(group_size, 1, heads_per_kv * max_q, max_kv)
            group.additive_masks[window] = additive_mask
        out = _softmax_attention(
            queries,
            keys.transpose(1, 2).to(q.dtype),
            values.transpose(1, 2).to(q.dtype),
            additive_mask,
            variant,
        )  # [g, Hkv, G * M, D]
        if self._is_decode:
            return out.reshape(group_size, num_heads, head_dim)
        out = out.view(group_size, num_kv_heads, heads_per_kv, max_q, head_dim).permute(0, 3, 1, 2, 4)
        out = out.reshape(group_size * max_q, num_heads, head_dim)  # [g * M, Hq, D]
        assert group.valid_index is not None
        return out.index_select(0, group.valid_index)

    def _attend_causal(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, variant: AttentionVariant
    ) -> torch.Tensor:
        """One request, no cached prefix: q `[T, Hq, D]`, keys/values `[T, Hkv, D]`."""
        num_tokens, num_heads, head_dim = q.shape
        group = num_heads // keys.shape[1]

        def per_query_head(x: torch.Tensor) -> torch.Tensor:  # [T, Hkv, D] -> [1, Hq, T, D]
            x = x.transpose(0, 1)[:, None].expand(-1, group, -1, -1)
            return x.reshape(num_heads, num_tokens, head_dim)[None]

        queries = q.transpose(0, 1)[None]
        if variant.is_plain:
            out = F.scaled_dot_product_attention(
                queries, per_query_head(keys), per_query_head(values), is_causal=True, scale=variant.scale
            )  # [1, Hq, T, D]
            return out[0].transpose(0, 1)
        pos = torch.arange(num_tokens, device=q.device)
        visible = pos[None, :] <= pos[:, None]
        if variant.sliding_window is not None:
            visible &= pos[None, :] > pos[:, None] - variant.sliding_window
        additive = torch.zeros(visible.shape, dtype=q.dtype, device=q.device)
        additive.masked_fill_(~visible, float("-inf"))
        out = _softmax_attention(queries, per_query_head(keys), per_query_head(values), additive, variant)
        return out[0].transpose(0, 1)


def _consecutive_start(kv_index: torch.Tensor) -> int | None:
    """kv_index `[1, S]`: its first slot when the slots are `first, first + 1, ...`, else None."""
    row = kv_index[0]
    if row.shape[0] == 0:  # a request without tokens (an extend graph's padding, run eagerly)
        return None
    first = int(row[0])
    if int(row[-1]) - first + 1 != row.shape[0]:
        return None
    return first if bool((row.diff() == 1).all()) else None


def _softmax_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    additive_mask: torch.Tensor,
    variant: AttentionVariant,
) -> torch.Tensor:
    """softmax(cap(q k^T * scale) + mask) v over the last two dims; SDPA unless scores are capped."""
    cap = variant.logit_softcap
    if cap is None:
        return F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=additive_mask, scale=variant.scale
        )
    scores = torch.matmul(queries, keys.transpose(-1, -2)) * variant.scale
    scores = torch.tanh(scores / cap) * cap + additive_mask
    probs = scores.softmax(dim=-1, dtype=torch.float32).to(values.dtype)
    return torch.matmul(probs, values)
