"""Fused Triton MoE: the routed experts' gated MLPs as two grouped GEMMs over expert-sorted pairs.

A (token, choice) pair is routed to one expert. `align_pairs_by_expert` sorts the pairs by expert
and pads each expert's run to a multiple of `BLOCK_M`, so that every `BLOCK_M` block of sorted
rows belongs to one expert (`block_expert_ids`). Then:

- kernel 1, grid (row block, intermediate block): gathers its tokens' hidden rows, multiplies
  them by the expert's gate and up rows (`w13 [E, 2I, H]`) and writes `silu(gate) * up` per pair;
- kernel 2, grid (row block, hidden block): multiplies those by the expert's `w2 [E, H, I]`,
  scales by the pair's routing weight and writes the pair's output;
- the K outputs of each token are summed (fixed order, no atomics: deterministic).

Everything runs on the device with shapes fixed by the token count (worst-case padding), so a
decode step with this kernel can be captured in a CUDA graph. Padding rows (pair id = number of
pairs) and blocks past the last expert's run (expert id = number of experts) do nothing.

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sglr.kernels.triton_online_softmax import dot_precision

BLOCK_M = 16
# Rows per block when experts get many tokens (prefill): bigger tiles reuse each weight tile more.
BLOCK_M_LARGE = 64


def align_pairs_by_expert(
    topk_ids: torch.Tensor, num_experts: int, block_m: int = BLOCK_M
) -> tuple[torch.Tensor, torch.Tensor]:
    """topk_ids `[T, K]` -> (sorted pair ids `[R]`, padded with T*K; expert of each `block_m`
    block `[R / block_m]`, num_experts past the last run). R is the worst case, so no host sync."""
    flat = topk_ids.reshape(-1)
    num_pairs = flat.numel()
    device = flat.device
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    run_start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    sorted_experts = flat[order]
    rank_in_run = torch.arange(num_pairs, device=device) - run_start[sorted_experts]
    num_rows = triton.cdiv(num_pairs + num_experts * (block_m - 1), block_m) * block_m
    sorted_pair_ids = torch.full((num_rows,), num_pairs, dtype=torch.int64, device=device)
    sorted_pair_ids[padded_start[sorted_experts] + rank_in_run] = order
    block_starts = torch.arange(0, num_rows, block_m, device=device)
    block_expert_ids = torch.searchsorted(padded_end, block_starts, right=True)
    return sorted_pair_ids, block_expert_ids


@triton.jit
def _gate_up_silu_kernel(
    X,
    W13,
    Act,
    sorted_pair_ids,
    block_expert_ids,
    num_pairs,
    num_experts,
    hidden_size,
    inter_size,
    stride_xt,
    stride_we,
    stride_wn,
    stride_at,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    block = tl.program_id(0)
    expert = tl.load(block_expert_ids + block)
    if expert >= num_experts:
        return
    pairs = tl.load(sorted_pair_ids + block * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = pairs < num_pairs
    tokens = (pairs // TOP_K).to(tl.int64)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < inter_size
    w_base = W13 + expert.to(tl.int64) * stride_we
    acc_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, hidden_size, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < hidden_size
        a = tl.load(
            X + tokens[:, None] * stride_xt + offs_k[None, :],
            mask=valid[:, None] & mask_k[None, :],
            other=0.0,
        )  # [M, K]
        w_mask = mask_k[:, None] & mask_n[None, :]
        w_gate = tl.load(w_base + offs_n[None, :] * stride_wn + offs_k[:, None], mask=w_mask, other=0.0)
        w_up = tl.load(
            w_base + (inter_size + offs_n)[None, :] * stride_wn + offs_k[:, None], mask=w_mask, other=0.0
        )  # [K, N]
        acc_gate = tl.dot(a, w_gate, acc_gate, input_precision=PRECISION)
        acc_up = tl.dot(a, w_up, acc_up, input_precision=PRECISION)
    act = acc_gate * tl.sigmoid(acc_gate) * acc_up
    tl.store(
        Act + pairs.to(tl.int64)[:, None] * stride_at + offs_n[None, :],
        act.to(Act.dtype.element_ty),
        mask=valid[:, None] & mask_n[None, :],
    )


@triton.jit
def _down_weighted_kernel(
    Act,
    W2,
    Weights,
    PairOut,
    sorted_pair_ids,
    block_expert_ids,
    num_pairs,
    num_experts,
    hidden_size,
    inter_size,
    stride_at,
    stride_we,
    stride_wn,
    stride_ot,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    block = tl.program_id(0)
    expert = tl.load(block_expert_ids + block)
    if expert >= num_experts:
        return
    pairs = tl.load(sorted_pair_ids + block * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = pairs < num_pairs
    rows = pairs.to(tl.int64)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < hidden_size
    w_base = W2 + expert.to(tl.int64) * stride_we
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter_size, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < inter_size
        a = tl.load(
            Act + rows[:, None] * stride_at + offs_k[None, :],
            mask=valid[:, None] & mask_k[None, :],
            other=0.0,
        )  # [M, K]
        w = tl.load(
            w_base + offs_n[None, :] * stride_wn + offs_k[:, None],
            mask=mask_k[:, None] & mask_n[None, :],
            other=0.0,
        )  # [K, N]
        acc = tl.dot(a, w, acc, input_precision=PRECISION)
    weight = tl.load(Weights + rows, mask=valid, other=0.0)
    acc = acc * weight[:, None]
    tl.store(
        PairOut + rows[:, None] * stride_ot + offs_n[None, :],
        acc.to(PairOut.dtype.element_ty),
        mask=valid[:, None] & mask_n[None, :],
    )


def fused_expert_mlp(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    """Same contract as `sglr.kernels.moe_grouped.expert_mlp`: `[T, H]` -> `[T, H]`."""
    if not (hidden.is_contiguous() and w13.is_contiguous() and w2.is_contiguous()):
        raise ValueError("fused_expert_mlp needs contiguous hidden states and expert weights")
    num_tokens, hidden_size = hidden.shape
    num_experts, two_inter, _ = w13.shape
    inter_size = two_inter // 2
    top_k = topk_ids.shape[1]
    num_pairs = num_tokens * top_k
    # Decode batches give each expert a few rows: small blocks waste less on padding.
    block_m = BLOCK_M if num_pairs <= 32 * num_experts else BLOCK_M_LARGE
    sorted_pair_ids, block_expert_ids = align_pairs_by_expert(topk_ids, num_experts, block_m)
    num_blocks = block_expert_ids.numel()
    precision = dot_precision(hidden.dtype)
    act = torch.empty(num_pairs, inter_size, dtype=hidden.dtype, device=hidden.device)
    block_n, block_k = 64, 32
    _gate_up_silu_kernel[(num_blocks, triton.cdiv(inter_size, block_n))](
        hidden, w13, act, sorted_pair_ids, block_expert_ids, num_pairs, num_experts,
        hidden_size, inter_size, hidden.stride(0), w13.stride(0), w13.stride(1), act.stride(0),
        TOP_K=top_k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, PRECISION=precision,
    )  # fmt: skip
    pair_out = torch.empty(num_pairs, hidden_size, dtype=hidden.dtype, device=hidden.device)
    weights = topk_weights.reshape(-1).to(torch.float32).contiguous()
    _down_weighted_kernel[(num_blocks, triton.cdiv(hidden_size, block_n))](
        act, w2, weights, pair_out, sorted_pair_ids, block_expert_ids, num_pairs, num_experts,
        hidden_size, inter_size, act.stride(0), w2.stride(0), w2.stride(1), pair_out.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, PRECISION=precision,
    )  # fmt: skip
    return pair_out.view(num_tokens, top_k, hidden_size).sum(dim=1)
