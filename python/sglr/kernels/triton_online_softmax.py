"""Building blocks shared by the Triton extend and decode kernels (inlined into both).

Both run a flash-attention style online softmax: key blocks are folded one at a time into a
running max `m_i`, a running sum `l_i` and an unnormalized output `acc`, all in fp32 and in
base 2 (the scale is premultiplied by log2(e)). Both sweep a request's cached KV the same way:
its slot ids come from its req-to-token row, and K/V rows are gathered from the pool by slot.

Layer variants (`AttentionVariant`): a sliding window arrives as `window` (keys at positions
`> q_pos - window` stay visible; `NO_WINDOW` when none) and soft-capped scores as
`SOFTCAP=True` with the scales from `score_scales`. Rows whose keys are all masked in a block
(possible with a window) keep a running max of -inf, so the exponentials are guarded.

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# A window wider than any context: `q_pos - NO_WINDOW` stays far below 0 in int32.
NO_WINDOW = 1 << 30


def score_scales(scale: float, softcap: float | None) -> tuple[float, float, bool]:
    """(qk_scale, cap_scale, SOFTCAP) for the kernels: base-2 scores are `q.k * qk_scale`, or
    `cap_scale * tanh(q.k * qk_scale)` when capped (cap * tanh(s / cap), times log2(e))."""
    if softcap is None:
        return scale * LOG2E, 1.0, False
    return scale / softcap, softcap * LOG2E, True


def window_or_none(window: int | None) -> int:
    return NO_WINDOW if window is None else window


def dot_precision(dtype: torch.dtype) -> str:
    """fp32 models need IEEE dots (TF32 would cost ~3 decimal digits); 16-bit inputs ignore it."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def online_softmax_step(
    q, k, v, visible, m_i, l_i, acc, qk_scale, cap_scale, SOFTCAP: tl.constexpr, PRECISION: tl.constexpr
):
    """Folds one key block into the running softmax of each query row.

    q `[M, D]`, k `[D, N]`, v `[N, D]`; `visible` (broadcast to `[M, N]`) masks keys out.
    Returns the updated `(m_i, l_i, acc)`.
    """
    s = tl.dot(q, k, input_precision=PRECISION) * qk_scale  # [M, N]
    if SOFTCAP:
        s = cap_scale * (2.0 * tl.sigmoid(2.0 * s) - 1.0)  # tanh, which tl lacks on every target
    s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # A row with nothing visible yet keeps m = -inf; subtract 0 instead (its p and alpha are 0).
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    l_i = l_i * alpha + tl.sum(p, 1)
    return m_new, l_i, acc


@triton.jit
def load_kv_block(K_head, V_head, rows, stride_k, stride_v, mask_n, offs_d, mask_d):
    """Rows `rows` `[N]` of one head's K and V (a row is `stride_*` elements further on):
    K transposed to `[D, N]` for `q @ k`, V as `[N, D]`; masked-out entries read as zero."""
    k = tl.load(
        K_head + rows[None, :] * stride_k + offs_d[:, None],
        mask=mask_n[None, :] & mask_d[:, None],
        other=0.0,
    )
    v = tl.load(
        V_head + rows[:, None] * stride_v + offs_d[None, :],
        mask=mask_n[:, None] & mask_d[None, :],
        other=0.0,
    )
    return k, v


@triton.jit
def attend_cached_range(
    q,
    table_row,
    K_head,
    V_head,
    lo,
    hi,
    stride_kcs,
    stride_vcs,
    qk_scale,
    cap_scale,
    q_pos,
    window,
    offs_d,
    mask_d,
    ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SOFTCAP: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """The online softmax of the `ROWS` queries `q` `[ROWS, BLOCK_D]` (at positions `q_pos`
    `[ROWS]`) over a request's cached keys at positions `lo..hi-1` -> `(m_i, l_i, acc)`, ready to
    fold in more keys.

    `table_row` points at the request's req-to-token row; `K_head` / `V_head` at one KV head of
    the layer's pool (a slot's row is `stride_*cs` further on). The caller picks a range that
    precedes all its queries; only the sliding `window` can hide a position in it.
    """
    m_i = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for n_start in range(lo, hi, BLOCK_N):
        cols = n_start + offs_n
        mask_n = cols < hi
        slots = tl.load(table_row + cols, mask=mask_n, other=0).to(tl.int64)
        k, v = load_kv_block(K_head, V_head, slots, stride_kcs, stride_vcs, mask_n, offs_d, mask_d)
        visible = mask_n[None, :] & (cols[None, :] > q_pos[:, None] - window)
        m_i, l_i, acc = online_softmax_step(
            q, k, v, visible, m_i, l_i, acc, qk_scale, cap_scale, SOFTCAP, PRECISION
        )
    return m_i, l_i, acc
