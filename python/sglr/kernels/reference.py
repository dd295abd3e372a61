"""Loop-per-request attention over the paged KV pool: the obviously-correct oracle.

Used by tests to check every other backend and kernel; too slow to serve with. Each request's
keys/values are gathered from the cache by the slots in its req-to-token row, then attended
with an explicit causal mask offset by the cached prefix length.
"""

from __future__ import annotations

import torch


def extend_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    req_to_token: torch.Tensor,
    req_rows: list[int],
    prefix_lens: list[int],
    extend_lens: list[int],
    scale: float,
    sliding_window: int | None = None,
    logit_softcap: float | None = None,
) -> torch.Tensor:
    """q `[T, Hq, D]` (requests' new tokens back to back); caches `[S, Hkv, D]` already holding
    every request's prefix *and* new K/V -> `[T, Hq, D]`. Computed in fp32. A query at position
    q sees keys at `q - sliding_window < p <= q`; scores are capped to `cap * tanh(s / cap)`."""
    num_heads, num_kv_heads = q.shape[1], k_cache.shape[1]
    group = num_heads // num_kv_heads
    out = torch.empty_like(q)
    start = 0
    for row, prefix_len, extend_len in zip(req_rows, prefix_lens, extend_lens, strict=True):
        seq_len = prefix_len + extend_len
        slots = req_to_token[row, :seq_len].long()
        keys = k_cache[slots].float().repeat_interleave(group, dim=1)  # [S, Hq, D]
        values = v_cache[slots].float().repeat_interleave(group, dim=1)
        queries = q[start : start + extend_len].float()  # [E, Hq, D]
        scores = torch.einsum("ehd,shd->hes", queries, keys) * scale  # [Hq, E, S]
        if logit_softcap is not None:
            scores = torch.tanh(scores / logit_softcap) * logit_softcap
        q_pos = prefix_len + torch.arange(extend_len, device=q.device)
        k_pos = torch.arange(seq_len, device=q.device)
        hidden = k_pos[None, :] > q_pos[:, None]  # [E, S]
        if sliding_window is not None:
            hidden |= k_pos[None, :] <= q_pos[:, None] - sliding_window
        scores = scores.masked_fill(hidden[None], float("-inf"))
        probs = scores.softmax(dim=-1)
        out[start : start + extend_len] = torch.einsum("hes,shd->ehd", probs, values).to(q.dtype)
        start += extend_len
    return out


def decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    req_to_token: torch.Tensor,
    req_rows: list[int],
    seq_lens: list[int],
    scale: float,
    sliding_window: int | None = None,
    logit_softcap: float | None = None,
) -> torch.Tensor:
    """One query per request (`q` `[B, Hq, D]`) over its `seq_len` cached tokens."""
    return extend_attention_reference(
        q, k_cache, v_cache, req_to_token, req_rows, [n - 1 for n in seq_lens], [1] * len(seq_lens),
        scale, sliding_window, logit_softcap,
    )  # fmt: skip


def moe_experts_reference(
    x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, weights: torch.Tensor, expert_ids: torch.Tensor
) -> torch.Tensor:
    """A MoE block's routed experts token by token, choice by choice, in the inputs' dtype:
    `x` `[T, H]`, `w13` `[E, 2I, H]` (gate rows, then up rows), `w2` `[E, H, I]`, `weights` and
    `expert_ids` `[T, k]` -> `sum_k weights * down(silu(gate) * up)` `[T, H]`."""
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(expert_ids.shape[1]):
            e = int(expert_ids[t, k])
            gate, up = (w13[e] @ x[t]).chunk(2)
            out[t] += weights[t, k] * (w2[e] @ (torch.nn.functional.silu(gate) * up))
    return out
