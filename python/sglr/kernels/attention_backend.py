"""`AttentionBackend`: the contract every attention backend implements, and the state they share.

A backend attends each request's queries to that request's KV, which lives anywhere in the
paged pool: the request's slots are row `req_rows[b]` of the req-to-token table. Per step the
runner calls `begin(metadata)` once (state shared by all layers), then each layer calls
`forward(layer_id, q, k, v)`, which first stores this step's k/v at `metadata.out_cache_slots`
and then attends causally over prefix + new tokens, as layer `layer_id`'s `AttentionVariant`
says (scale, sliding window, soft-cap; plain causal attention with `scale` when none is given).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from sglr.errors import InvariantError, UnsupportedAttentionError
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.kv_pool import PagedKVPool


class AttentionBackend(ABC):
    """Attends over `kv_pool`, finding each request's slots in the `req_to_token` table
    `[rows, max_context_len]`; `scale` multiplies q.k before the softmax. `layer_variants`, one
    per layer when given, override it (and add windows or soft-caps) layer by layer; a backend
    raises `UnsupportedAttentionError` here for a variant it cannot compute."""

    name: str
    # Whether decode with this backend can be captured in a CUDA graph (static shapes only).
    supports_cuda_graph: bool
    # Whether an extend can be: every length read from device memory, launches sized by host
    # maxima alone, requests without tokens allowed (a padded batch's empty request slots).
    supports_cuda_graph_extend: bool = False
    supports_sliding_window: bool = False
    supports_logit_softcap: bool = False

    def __init__(
        self,
        kv_pool: PagedKVPool,
        req_to_token: torch.Tensor,
        scale: float,
        layer_variants: Sequence[AttentionVariant] = (),
    ) -> None:
        self.kv_pool = kv_pool
        self.req_to_token = req_to_token
        self.scale = scale
        self.layer_variants = tuple(layer_variants)
        self._plain = AttentionVariant(scale)
        self._metadata: AttentionMetadata | None = None
        for layer_id, variant in enumerate(self.layer_variants):
            if variant.sliding_window is not None and not self.supports_sliding_window:
                raise UnsupportedAttentionError(
                    f"the {self.name!r} attention backend does not support sliding-window attention "
                    f"(layer {layer_id}, window {variant.sliding_window}); use 'torch' or 'triton'"
                )
            if variant.logit_softcap is not None and not self.supports_logit_softcap:
                raise UnsupportedAttentionError(
                    f"the {self.name!r} attention backend does not support attention logit soft-capping "
                    f"(layer {layer_id}); use 'torch' or 'triton'"
                )

    def variant(self, layer_id: int) -> AttentionVariant:
        """Layer `layer_id`'s attention (plain causal with `scale` when no variants were given)."""
        return self.layer_variants[layer_id] if self.layer_variants else self._plain

    def begin(self, metadata: AttentionMetadata) -> None:
        """Prepares per-step state. Must precede the layers' `forward` calls for this step;
        subclasses extend it with their own preparation."""
        self._metadata = metadata

    @property
    def metadata(self) -> AttentionMetadata:
        """The step in flight (the last `begin`)."""
        if self._metadata is None:
            raise InvariantError("begin(metadata) must precede forward")
        return self._metadata

    @abstractmethod
    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q `[T, Hq, D]`, k/v `[T, Hkv, D]` of this step's tokens -> `[T, Hq, D]`.
        Mutates the KV pool: writes k/v into layer `layer_id` at the step's out slots."""
