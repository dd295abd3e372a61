"""Allowed-token bitmasks: int32 words `[B, ceil(V / 32)]`, bit `t % 32` of word `t // 32` set
when token `t` is allowed (the layout the constrained-decoding core writes)."""

from __future__ import annotations

import torch

_BIT_SHIFTS_CACHE: dict[torch.device, torch.Tensor] = {}


def num_mask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def unpack_token_mask(words: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """int32 words `[B, W]` -> bool `[B, vocab_size]`. Tokens past `32 * W` are disallowed;
    bits past `vocab_size` are ignored."""
    shifts = _BIT_SHIFTS_CACHE.get(words.device)
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=words.device)
        _BIT_SHIFTS_CACHE[words.device] = shifts
    # Arithmetic shift of a negative word still leaves the wanted bit in position 0.
    bits = (words.to(torch.int32)[:, :, None] >> shifts) & 1  # [B, W, 32]
    allowed = bits.reshape(words.shape[0], -1).bool()
    if allowed.shape[1] >= vocab_size:
        return allowed[:, :vocab_size]
    pad = torch.zeros((words.shape[0], vocab_size - allowed.shape[1]), dtype=torch.bool, device=words.device)
    return torch.cat((allowed, pad), dim=1)


def pack_token_mask(allowed: torch.Tensor) -> torch.Tensor:
    """bool `[B, V]` -> int32 words `[B, ceil(V / 32)]` (inverse of `unpack_token_mask`)."""
    batch, vocab = allowed.shape
    padded = torch.zeros((batch, num_mask_words(vocab) * 32), dtype=torch.int64, device=allowed.device)
    padded[:, :vocab] = allowed.long()
    weights = torch.ones(32, dtype=torch.int64, device=allowed.device) << torch.arange(
        32, device=allowed.device
    )
    words = (padded.view(batch, -1, 32) * weights).sum(-1)  # [B, W], values < 2**32
    # Reinterpret as two's-complement int32.
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
