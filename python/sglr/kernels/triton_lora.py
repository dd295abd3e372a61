"""LoRA deltas of a batch mixing adapters, as two grouped GEMMs (a segmented shrink and expand):
`y[t] += (x[t] @ shrink[s].T) @ expand[s].T` for each row t whose adapter slot is s.

The adapters of one linear are stacked by slot: `shrink [S, R, in]`, `expand [S, out, R]`, R the
largest rank padded to a multiple of 16 with zeros (a smaller adapter's extra rank adds nothing).
Rows are sorted by slot on the device and each slot's run padded to `BLOCK_M`
(`align_pairs_by_expert`, the MoE kernels' routing with one choice per row), so every block of
rows shares one slot and multiplies one weight tile. Rows of slot S (the base model) are left as
they are. Shapes depend on the row count alone and nothing syncs with the host, so a decode step
using it can be captured in a CUDA graph.

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sglr.kernels.triton_moe import align_pairs_by_expert
from sglr.kernels.triton_online_softmax import dot_precision

BLOCK_M = 16
BLOCK_R = 16
BLOCK_N = 64
BLOCK_K = 64
RANK_MULTIPLE = 16  # tl.dot needs at least 16 along each dimension


@triton.jit
def _shrink_kernel(
    X, Shrink, Ranks, sorted_rows, block_slots, num_rows, num_slots, in_features, rank,
    stride_xt, stride_ss, stride_sr, stride_rt,
    BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    slot = tl.load(block_slots + block)
    if slot >= num_slots:
        return
    rows = tl.load(sorted_rows + block * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = rows < num_rows
    rows64 = rows.to(tl.int64)
    offs_r = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    mask_r = offs_r < rank
    base = Shrink + slot.to(tl.int64) * stride_ss
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k0 in range(0, in_features, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < in_features
        x = tl.load(
            X + rows64[:, None] * stride_xt + offs_k[None, :],
            mask=valid[:, None] & mask_k[None, :],
            other=0.0,
        )
        w = tl.load(
            base + offs_r[None, :] * stride_sr + offs_k[:, None],
            mask=mask_k[:, None] & mask_r[None, :],
            other=0.0,
        )
        acc = tl.dot(x.to(w.dtype), w, acc, input_precision=PRECISION)
    tl.store(
        Ranks + rows64[:, None] * stride_rt + offs_r[None, :], acc, mask=valid[:, None] & mask_r[None, :]
    )


@triton.jit
def _expand_kernel(
    Ranks, Expand, Y, sorted_rows, block_slots, num_rows, num_slots, out_features, rank,
    stride_rt, stride_es, stride_en, stride_yt,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    slot = tl.load(block_slots + block)
    if slot >= num_slots:
        return
    rows = tl.load(sorted_rows + block * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = rows < num_rows
    rows64 = rows.to(tl.int64)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < out_features
    base = Expand + slot.to(tl.int64) * stride_es
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, rank, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        mask_r = offs_r < rank
        s = tl.load(
            Ranks + rows64[:, None] * stride_rt + offs_r[None, :],
            mask=valid[:, None] & mask_r[None, :],
            other=0.0,
        )
        w = tl.load(
            base + offs_n[None, :] * stride_en + offs_r[:, None],
            mask=mask_r[:, None] & mask_n[None, :],
            other=0.0,
        )
        acc = tl.dot(s.to(w.dtype), w, acc, input_precision=PRECISION)
    y_ptrs = Y + rows64[:, None] * stride_yt + offs_n[None, :]
    mask = valid[:, None] & mask_n[None, :]
    y = tl.load(y_ptrs, mask=mask, other=0.0)
    tl.store(y_ptrs, (y.to(tl.float32) + acc).to(Y.dtype.element_ty), mask=mask)


def add_lora_deltas(
    x: torch.Tensor, y: torch.Tensor, shrink: torch.Tensor, expand: torch.Tensor, row_slots: torch.Tensor
) -> torch.Tensor:
    """x `[T, in]`, y `[T, out]` (updated in place and returned), shrink `[S, R, in]`, expand
    `[S, out, R]` (R a multiple of 16), row_slots `[T]` int64: each row's slot, S for none."""
    num_rows, in_features = x.shape
    num_slots, rank, _ = shrink.shape
    out_features = expand.shape[1]
    if num_rows == 0:
        return y
    if (
        rank % RANK_MULTIPLE
        or expand.shape != (num_slots, out_features, rank)
        or shrink.shape[2] != in_features
    ):
        raise ValueError(
            f"stacked LoRA shapes {tuple(shrink.shape)} / {tuple(expand.shape)} do not fit x {tuple(x.shape)}"
        )
    if y.stride(1) != 1:
        raise ValueError("y needs contiguous rows")
    x = x.contiguous()
    sorted_rows, block_slots = align_pairs_by_expert(row_slots[:, None], num_slots + 1, BLOCK_M)
    ranks = torch.empty(num_rows, rank, dtype=torch.float32, device=x.device)
    precision = dot_precision(shrink.dtype)
    num_blocks = block_slots.numel()
    _shrink_kernel[(num_blocks, triton.cdiv(rank, BLOCK_R))](
        x, shrink, ranks, sorted_rows, block_slots, num_rows, num_slots, in_features, rank,
        x.stride(0), shrink.stride(0), shrink.stride(1), ranks.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_R=BLOCK_R, BLOCK_K=BLOCK_K, PRECISION=precision,
    )  # fmt: skip
    _expand_kernel[(num_blocks, triton.cdiv(out_features, BLOCK_N))](
        ranks, expand, y, sorted_rows, block_slots, num_rows, num_slots, out_features, rank,
        ranks.stride(0), expand.stride(0), expand.stride(1), y.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_R=BLOCK_R, PRECISION=precision,
    )  # fmt: skip
    return y


def padded_rank(rank: int) -> int:
    return -(-rank // RANK_MULTIPLE) * RANK_MULTIPLE
