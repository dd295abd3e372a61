"""Triton decode attention: one query per request over its paged KV, split over the sequence.

Stage 1, grid (request, KV head, split): the query heads that share a KV head are processed
together (so each K/V row is read once per group, not once per query head), over one of the
grid's `num_kv_splits` contiguous ranges of the request's sequence; the program writes a partial
output and its log-sum-exp. Stage 2, grid (request, query head): merges the splits. Splitting
keeps the GPU busy when the batch is small and contexts are long (flash-decoding). With a single
split (large batches) stage 1 writes the final output itself and stage 2 is not launched. With a
sliding window the splits cover only the window (the last `window` positions). A split's range
is a whole number of key blocks (the last may be short), so no program loads a mostly masked
block; short sequences leave the later splits empty.

The split count comes from the batch size alone (`triton_decode_tuning.num_kv_splits_for`); the
split kernel reads it from its grid, so one compiled kernel serves every split count. Tile and
pipeline options: `DecodeTuning` (the defaults serve; `benches/decode_attention_gpu.py` sweeps them).

Shapes depend only on the batch size and `num_kv_splits`, never on sequence lengths (which are
read from device memory), so a decode step can be captured in a CUDA graph.

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sglr.kernels.triton_decode_tuning import (
    DEFAULT_NUM_KV_SPLITS,
    DEFAULT_TUNING,
    MAX_NUM_KV_SPLITS,
    DecodeTuning,
    num_kv_splits_for,
    splits_to_fill,
)
from sglr.kernels.triton_online_softmax import (
    attend_cached_range,
    dot_precision,
    score_scales,
    window_or_none,
)

__all__ = [
    "DEFAULT_NUM_KV_SPLITS",
    "MAX_NUM_KV_SPLITS",
    "DecodeTuning",
    "decode_attention",
    "num_kv_splits_for",
    "splits_to_fill",
]


@triton.jit
def _first_split_entry(req, heads, num_heads, num_splits):
    """Where split 0 of (request, head) sits in the partial buffers, which the wrapper allocates
    contiguous: log-sum-exps `[B, Hq, num_splits]`, outputs `[B, Hq, num_splits, HEAD_DIM]`."""
    return (req * num_heads + heads) * num_splits


@triton.jit
def _decode_split_kernel(
    Q,
    K_cache,
    V_cache,
    Table,
    req_rows,
    seq_lens,
    Partial_out,
    Partial_lse,
    Out,
    qk_scale,
    cap_scale,
    window,
    stride_qb,
    stride_qh,
    stride_kcs,
    stride_kch,
    stride_vcs,
    stride_vch,
    stride_table,
    stride_ob,
    stride_oh,
    num_heads,
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SOFTCAP: tl.constexpr,
    PRECISION: tl.constexpr,
    DIRECT_OUT: tl.constexpr,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)
    seq_len = tl.load(seq_lens + req)
    row = tl.load(req_rows + req).to(tl.int64)
    first_key = tl.maximum(seq_len - window, 0)  # every position from here on is visible
    # Whole key blocks per split: a range of 67 keys would take two block loads for one block's work.
    split_len = tl.cdiv(tl.cdiv(seq_len - first_key, num_splits), BLOCK_N) * BLOCK_N
    lo = first_key + split * split_len
    hi = tl.minimum(lo + split_len, seq_len)

    offs_g = tl.arange(0, BLOCK_H)
    heads = kv_head * GROUP + offs_g
    mask_h = offs_g < GROUP
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    q = tl.load(
        Q + req * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=mask_h[:, None] & mask_d[None, :],
        other=0.0,
    )  # [H, D]

    q_pos = tl.zeros([BLOCK_H], dtype=tl.int32) + seq_len - 1
    m_i, l_i, acc = attend_cached_range(
        q, Table + row * stride_table, K_cache + kv_head * stride_kch, V_cache + kv_head * stride_vch,
        lo, hi, stride_kcs, stride_vcs, qk_scale, cap_scale, q_pos, window, offs_d, mask_d,
        BLOCK_H, BLOCK_D, BLOCK_N, SOFTCAP, PRECISION,
    )  # fmt: skip

    mask_hd = mask_h[:, None] & mask_d[None, :]
    if DIRECT_OUT:  # the only split: never empty (seq_len >= 1), no merge to come
        out_ptrs = Out + req * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(out_ptrs, (acc / l_i[:, None]).to(Out.dtype.element_ty), mask=mask_hd)
    else:
        entries = _first_split_entry(req, heads, num_heads, num_splits) + split  # [H]
        lse_ptrs = Partial_lse + entries
        if hi > lo:
            out_ptrs = Partial_out + entries[:, None] * HEAD_DIM + offs_d[None, :]
            tl.store(out_ptrs, acc / l_i[:, None], mask=mask_hd)
            tl.store(lse_ptrs, m_i + tl.log2(l_i), mask=mask_h)  # base-2 log-sum-exp
        else:
            tl.store(lse_ptrs, tl.full([BLOCK_H], float("-inf"), dtype=tl.float32), mask=mask_h)


@triton.jit
def _decode_merge_kernel(
    Partial_out,
    Partial_lse,
    Out,
    num_heads,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    req = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    mask_s = offs_s < NUM_SPLITS
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    entries = _first_split_entry(req, head, num_heads, NUM_SPLITS) + offs_s  # [S]
    lse = tl.load(Partial_lse + entries, mask=mask_s, other=float("-inf"))
    # Split 0 is never empty (seq_len >= 1), so the max is finite.
    weights = tl.exp2(lse - tl.max(lse, 0))  # [S]; empty splits weigh 0
    partial = tl.load(
        Partial_out + entries[:, None] * HEAD_DIM + offs_d[None, :],
        mask=(weights[:, None] > 0) & mask_d[None, :],
        other=0.0,
    )  # [S, D]
    out = tl.sum(partial * weights[:, None], 0) / tl.sum(weights, 0)
    tl.store(Out + req * stride_ob + head * stride_oh + offs_d, out.to(Out.dtype.element_ty), mask=mask_d)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    req_to_token: torch.Tensor,
    req_rows: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int | None = None,
    out: torch.Tensor | None = None,
    sliding_window: int | None = None,
    logit_softcap: float | None = None,
    tuning: DecodeTuning = DEFAULT_TUNING,
) -> torch.Tensor:
    """q `[B, Hq, D]`; request b attends to the first `seq_lens[b]` slots of table row
    `req_rows[b]` (its own K/V included: store it first) -> `[B, Hq, D]`. `sliding_window` /
    `logit_softcap` as in `AttentionVariant`; `num_kv_splits` None: `num_kv_splits_for` under
    `tuning`, which also gives the split kernel's tile and launch options."""
    batch_size, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[1]
    if num_kv_splits is None:
        num_kv_splits = num_kv_splits_for(batch_size, num_kv_heads, q.device, tuning)
    group = num_heads // num_kv_heads
    if out is None:
        out = torch.empty_like(q)
    direct = num_kv_splits == 1
    # With one split the partial buffers are never touched: one-element stand-ins.
    partial_shape = (1,) if direct else (batch_size, num_heads, num_kv_splits)
    partial_out = torch.empty((*partial_shape, head_dim), dtype=torch.float32, device=q.device)
    partial_lse = torch.empty(partial_shape, dtype=torch.float32, device=q.device)
    block_d = max(16, triton.next_power_of_2(head_dim))  # tl.dot needs >= 16 on GPUs
    qk_scale, cap_scale, softcap = score_scales(scale, logit_softcap)
    _decode_split_kernel[(batch_size, num_kv_heads, num_kv_splits)](
        q, k_cache, v_cache, req_to_token, req_rows, seq_lens, partial_out, partial_lse, out,
        qk_scale, cap_scale, window_or_none(sliding_window),
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
        req_to_token.stride(0), out.stride(0), out.stride(1), num_heads,
        GROUP=group,
        # tl.dot needs at least 16 rows; unused rows are masked.
        BLOCK_H=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        BLOCK_N=tuning.block_n_for(head_dim),
        SOFTCAP=softcap,
        PRECISION=dot_precision(q.dtype),
        DIRECT_OUT=direct,
        **tuning.launch_options(),
    )  # fmt: skip
    if direct:
        return out
    _decode_merge_kernel[(batch_size, num_heads)](
        partial_out, partial_lse, out, num_heads, out.stride(0), out.stride(1),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        NUM_SPLITS=num_kv_splits,
        BLOCK_S=triton.next_power_of_2(num_kv_splits),
    )  # fmt: skip
    return out
