"""Triton extend attention: new tokens attend to a cached prefix in the paged pool plus themselves.

Grid: (request, query head, block of BLOCK_M new tokens). Each program runs an online softmax
in two stages: first over the request's cached prefix, whose K/V rows are gathered from the
pool through the request's req-to-token row (no mask needed: every prefix token precedes every
new token); then over the request's new tokens, read contiguously from this step's k/v with
the causal mask. Programs whose query block lies past the request's extend length exit at once.
With a sliding window both stages start at the block's first visible key and mask per row.

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sglr.kernels.triton_online_softmax import (
    attend_cached_range,
    dot_precision,
    load_kv_block,
    online_softmax_step,
    score_scales,
    window_or_none,
)


@triton.jit
def _extend_kernel(
    Q,
    K_new,
    V_new,
    Out,
    K_cache,
    V_cache,
    Table,
    req_rows,
    prefix_lens,
    extend_lens,
    extend_starts,
    qk_scale,
    cap_scale,
    window,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    stride_kcs,
    stride_kch,
    stride_vcs,
    stride_vch,
    stride_table,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SOFTCAP: tl.constexpr,
    PRECISION: tl.constexpr,
):
    req = tl.program_id(0)
    head = tl.program_id(1)
    block_m = tl.program_id(2)
    extend_len = tl.load(extend_lens + req)
    if block_m * BLOCK_M >= extend_len:
        return
    prefix_len = tl.load(prefix_lens + req)
    start = tl.load(extend_starts + req).to(tl.int64)
    row = tl.load(req_rows + req).to(tl.int64)
    kv_head = head // GROUP

    offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < extend_len
    mask_d = offs_d < HEAD_DIM
    q_ptrs = Q + (start + offs_m)[:, None] * stride_qt + head * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_m[:, None] & mask_d[None, :], other=0.0)  # [M, D]

    # Stage 1: the cached prefix, gathered from the pool by slot id; keys before the window of
    # the block's first query are never visible.
    first_key = tl.maximum(prefix_len + block_m * BLOCK_M - window + 1, 0)
    m_i, l_i, acc = attend_cached_range(
        q, Table + row * stride_table, K_cache + kv_head * stride_kch, V_cache + kv_head * stride_vch,
        first_key, prefix_len, stride_kcs, stride_vcs, qk_scale, cap_scale, prefix_len + offs_m, window,
        offs_d, mask_d, BLOCK_M, BLOCK_D, BLOCK_N, SOFTCAP, PRECISION,
    )  # fmt: skip

    # Stage 2: the new tokens themselves, causal. Keys past this query block are never needed.
    K_new_head = K_new + kv_head * stride_kh
    V_new_head = V_new + kv_head * stride_vh
    offs_n = tl.arange(0, BLOCK_N)
    n_end = tl.minimum(extend_len, (block_m + 1) * BLOCK_M)
    n_first = tl.maximum(block_m * BLOCK_M - window + 1, 0)
    for n_start in range(n_first, n_end, BLOCK_N):
        cols = n_start + offs_n
        mask_n = cols < extend_len
        k, v = load_kv_block(
            K_new_head, V_new_head, start + cols, stride_kt, stride_vt, mask_n, offs_d, mask_d
        )
        visible = (offs_m[:, None] >= cols[None, :]) & mask_n[None, :]
        visible &= cols[None, :] > offs_m[:, None] - window
        m_i, l_i, acc = online_softmax_step(
            q, k, v, visible, m_i, l_i, acc, qk_scale, cap_scale, SOFTCAP, PRECISION
        )

    # Padding rows past the extend (not stored) may see no key under a window: avoid 0 / 0.
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_ptrs = Out + (start + offs_m)[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


def extend_attention(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    req_to_token: torch.Tensor,
    req_rows: torch.Tensor,
    prefix_lens: torch.Tensor,
    extend_lens: torch.Tensor,
    extend_starts: torch.Tensor,
    max_extend_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    sliding_window: int | None = None,
    logit_softcap: float | None = None,
) -> torch.Tensor:
    """q `[T, Hq, D]`, k/v_new `[T, Hkv, D]` (this step's tokens, request-major); caches
    `[S, Hkv, D]` holding each request's prefix at the slots in its table row -> `[T, Hq, D]`.
    Per-request tensors are integer `[B]` tensors on the device; `max_extend_len` sizes the grid.
    `sliding_window` / `logit_softcap` as in `AttentionVariant`."""
    _, num_heads, head_dim = q.shape
    group = num_heads // k_new.shape[1]
    if out is None:
        out = torch.empty_like(q)
    block_m, block_n = (64, 64) if head_dim <= 128 else (32, 32)
    grid = (req_rows.shape[0], num_heads, triton.cdiv(max_extend_len, block_m))
    qk_scale, cap_scale, softcap = score_scales(scale, logit_softcap)
    _extend_kernel[grid](
        q, k_new, v_new, out, k_cache, v_cache, req_to_token,
        req_rows, prefix_lens, extend_lens, extend_starts,
        qk_scale, cap_scale, window_or_none(sliding_window),
        q.stride(0), q.stride(1), k_new.stride(0), k_new.stride(1), v_new.stride(0), v_new.stride(1),
        out.stride(0), out.stride(1), k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
        req_to_token.stride(0),
        GROUP=group,
        HEAD_DIM=head_dim,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),  # tl.dot needs >= 16 on GPUs
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        SOFTCAP=softcap,
        PRECISION=dot_precision(q.dtype),
        num_warps=4 if head_dim <= 64 else 8,
    )  # fmt: skip
    return out
