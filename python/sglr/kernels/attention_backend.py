"""`AttentionBackend`: the contract every attention backend implements, and the state they share.

A backend attends each request's queries to that request's KV, which lives anywhere in the
paged pool: the request's slots are row `req_rows[b]` of the req-to-token table. Per step the
runner calls `begin(metadata)` once (state shared by all layers), then each layer calls
`forward(layer_id, q, k, v)`, which first stores this step's k/v at `metadata.out_cache_slots`
and then attends causally over prefix + new tokens.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from sglr.errors import InvariantError
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.kv_pool import PagedKVPool


class AttentionBackend(ABC):
    """Attends over `kv_pool`, finding each request's slots in the `req_to_token` table
    `[rows, max_context_len]`; `scale` multiplies q.k before the softmax."""

    name: str
    # Whether decode with this backend can be captured in a CUDA graph (static shapes only).
    supports_cuda_graph: bool

    def __init__(self, kv_pool: PagedKVPool, req_to_token: torch.Tensor, scale: float) -> None:
        self.kv_pool = kv_pool
        self.req_to_token = req_to_token
        self.scale = scale
        self._metadata: AttentionMetadata | None = None

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
