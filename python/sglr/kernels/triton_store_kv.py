"""Triton store-KV: scatter this step's K and V rows into the pool at their slots, in one launch.

One program per (token, chunk of the row) copies that token's K and V (`Hkv * D` values each),
casting to the cache dtype. Replaces two indexed assignments per layer (one for K, one for V).

Import this module only with CUDA or with TRITON_INTERPRET=1 set (Triton decides at import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _store_kv_kernel(
    K,
    V,
    K_cache,
    V_cache,
    slots,
    stride_kt,
    stride_vt,
    stride_kcs,
    stride_vcs,
    ROW_SIZE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    token = tl.program_id(0)
    chunk = tl.program_id(1)
    slot = tl.load(slots + token).to(tl.int64)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < ROW_SIZE
    k = tl.load(K + token * stride_kt + offs, mask=mask)
    v = tl.load(V + token * stride_vt + offs, mask=mask)
    tl.store(K_cache + slot * stride_kcs + offs, k.to(K_cache.dtype.element_ty), mask=mask)
    tl.store(V_cache + slot * stride_vcs + offs, v.to(V_cache.dtype.element_ty), mask=mask)


def store_kv(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor
) -> None:
    """k, v `[T, Hkv, D]` (each token's row contiguous) -> `cache[slots[t]] = row t`."""
    num_tokens = k.shape[0]
    if num_tokens == 0:
        return
    row_size = k.shape[1] * k.shape[2]
    if k.stride(2) != 1 or k.stride(1) != k.shape[2] or v.stride(2) != 1 or v.stride(1) != v.shape[2]:
        raise ValueError("store_kv needs each token's K/V row to be contiguous")
    block = min(1024, triton.next_power_of_2(row_size))
    grid = (num_tokens, triton.cdiv(row_size, block))
    _store_kv_kernel[grid](
        k, v, k_cache, v_cache, slots,
        k.stride(0), v.stride(0), k_cache.stride(0), v_cache.stride(0),
        ROW_SIZE=row_size,
        BLOCK=block,
    )  # fmt: skip
