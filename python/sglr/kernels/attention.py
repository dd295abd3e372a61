"""Picking an attention backend by name.

Backends: "torch" (reference, CPU and GPU), "triton" (CUDA, or CPU under TRITON_INTERPRET=1),
"flashinfer" (CUDA, when the optional `flashinfer` package is installed). Their common contract
is `sglr.kernels.attention_backend.AttentionBackend`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sglr.errors import ModelError
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.kv_pool import PagedKVPool

ATTENTION_BACKENDS = ("auto", "torch", "triton", "flashinfer")


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
    name: str,
    kv_pool: PagedKVPool,
    req_to_token: torch.Tensor,
    scale: float,
    layer_variants: Sequence[AttentionVariant] = (),
) -> AttentionBackend:
    """A backend over `kv_pool`, reading request slots from the `req_to_token` table tensor;
    `layer_variants` (one per layer) as in `AttentionBackend`."""
    resolved = resolve_backend_name(name, kv_pool.device)
    # Imported on demand: the Triton and FlashInfer modules need their packages (and a device).
    if resolved == "torch":
        from sglr.kernels.torch_backend import TorchAttentionBackend

        return TorchAttentionBackend(kv_pool, req_to_token, scale, layer_variants)
    if resolved == "triton":
        from sglr.kernels.triton_backend import TritonAttentionBackend

        return TritonAttentionBackend(kv_pool, req_to_token, scale, layer_variants)
    from sglr.kernels.flashinfer_backend import FlashInferAttentionBackend

    return FlashInferAttentionBackend(kv_pool, req_to_token, scale, layer_variants)
