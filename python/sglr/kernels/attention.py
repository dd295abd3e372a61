"""The attention-backend contract and the factory that picks one.

A backend attends each request's queries to that request's KV, which lives anywhere in the
paged pool: the request's slots are row `req_rows[b]` of the req-to-token table. Per batch the
runner calls `begin(batch)` once (metadata shared by all layers), then each layer calls
`forward(layer_id, q, k, v)`, which first stores this step's k/v at `batch.out_cache_slots`
and then attends causally over prefix + new tokens.

Backends: "torch" (reference, CPU and GPU), "triton" (CUDA, or CPU under TRITON_INTERPRET=1),
"flashinfer" (CUDA, when the optional `flashinfer` package is installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from sglr.errors import ModelError

if TYPE_CHECKING:
    from sglr.model.forward_batch import ForwardBatch
    from sglr.model.kv_cache import KVCache

ATTENTION_BACKENDS = ("auto", "torch", "triton", "flashinfer")


class AttentionBackend(Protocol):
    name: str
    # Whether decode with this backend can be captured in a CUDA graph (static shapes only).
    supports_cuda_graph: bool

    def begin(self, batch: ForwardBatch) -> None:
        """Prepares per-batch metadata. Must precede the layers' `forward` calls for `batch`."""
        ...

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q `[T, Hq, D]`, k/v `[T, Hkv, D]` of this step's tokens -> `[T, Hq, D]`.
        Mutates the KV cache: writes k/v into layer `layer_id` at the batch's out slots."""
        ...


def flashinfer_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("flashinfer") is not None


def resolve_backend_name(name: str, device: torch.device) -> str:
    """ "auto" -> flashinfer on CUDA when installed, else triton on CUDA, else torch."""
    if name not in ATTENTION_BACKENDS:
        raise ModelError(f"unknown attention backend {name!r}; choose from {ATTENTION_BACKENDS}")
    if name == "auto":
        if device.type != "cuda":
            return "torch"
        return "flashinfer" if flashinfer_available() else "triton"
    if name == "flashinfer" and (device.type != "cuda" or not flashinfer_available()):
        raise ModelError("the flashinfer backend needs a CUDA device and the flashinfer package")
    if name == "triton" and device.type != "cuda":
        from sglr.envs import triton_interpret

        if not triton_interpret():
            raise ModelError("the triton backend on CPU needs TRITON_INTERPRET=1")
    return name


def create_attention_backend(
    name: str, kv_cache: KVCache, req_to_token: torch.Tensor, scale: float
) -> AttentionBackend:
    """A backend over `kv_cache`, reading request slots from the `req_to_token` table tensor."""
    resolved = resolve_backend_name(name, kv_cache.device)
    if resolved == "torch":
        from sglr.kernels.torch_backend import TorchAttentionBackend

        return TorchAttentionBackend(kv_cache, req_to_token, scale)
    if resolved == "triton":
        from sglr.kernels.triton_backend import TritonAttentionBackend

        return TritonAttentionBackend(kv_cache, req_to_token, scale)
    from sglr.kernels.flashinfer_backend import FlashInferAttentionBackend

    return FlashInferAttentionBackend(kv_cache, req_to_token, scale)
