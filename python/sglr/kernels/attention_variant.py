"""`AttentionVariant`: how one layer's attention departs from plain causal softmax attention.

Model families differ in three ways the kernels must know about: the score scale (Gemma uses
`query_pre_attn_scalar ** -0.5`, not `head_dim ** -0.5`), a sliding window (Mistral, Gemma's
local layers) and tanh soft-capping of the scores (Gemma 2). A backend receives one variant per
layer when it is built, so it can refuse what it cannot compute before the first request.

Sliding window `W` (transformers' convention): a query at position `q` sees the key at position
`p` iff `q - W < p <= q`, i.e. the last `W` keys including its own. Every key stays in the KV
cache (a cached prefix can be shared by requests at any position); attention only masks them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sglr.errors import ModelConfigError


@dataclass(frozen=True)
class AttentionVariant:
    scale: float  # multiplies q.k before capping and softmax
    sliding_window: int | None = None  # keys visible to a query, its own included; None = all
    logit_softcap: float | None = None  # scores -> cap * tanh(scores / cap); None = no capping

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ModelConfigError(f"attention scale must be > 0, got {self.scale}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ModelConfigError(f"sliding window must be >= 1, got {self.sliding_window}")
        if self.logit_softcap is not None and self.logit_softcap <= 0:
            raise ModelConfigError(f"attention logit soft-cap must be > 0, got {self.logit_softcap}")

    @property
    def is_plain(self) -> bool:
        return self.sliding_window is None and self.logit_softcap is None


def without_idle_windows(variants: list[AttentionVariant], max_context_len: int) -> list[AttentionVariant]:
    """A window at least as long as the context hides nothing: dropping it keeps such models
    (e.g. Mistral 7B v0.1's 4096 window under a 4096 context) on backends without windows."""
    return [
        dataclasses.replace(v, sliding_window=None)
        if v.sliding_window is not None and v.sliding_window >= max_context_len
        else v
        for v in variants
    ]
