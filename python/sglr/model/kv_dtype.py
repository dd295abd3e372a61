"""The KV cache's storage dtype (`RunnerConfig.kv_cache_dtype`) and what an fp8 cache needs: its
per-layer scales from the checkpoint, and an attention backend that dequantizes what it reads.

Only the torch backend reads fp8 pools (it multiplies the gathered rows by the layer's scales);
triton and flashinfer are refused rather than fed bytes they would misread. The torch backend
captures no CUDA graphs, so an fp8 cache always runs the layered decode path; the fused CPU
decode step of a GGUF model turns itself off over an fp8 cache (`cpu_fused_decode.unsupported_reason`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from sglr.errors import ModelConfigError
from sglr.kernels.fp8_linear import FP8_DTYPE
from sglr.model.fp8_checkpoint import fp8_checkpoint_layout, fp8_kv_scales
from sglr.model.kv_cache import KVCache
from sglr.model.runner_config import RunnerConfig


def kv_storage_dtype(config: RunnerConfig, run_dtype: torch.dtype) -> torch.dtype:
    return FP8_DTYPE if config.kv_cache_dtype == "fp8_e4m3" else run_dtype


def kv_attention_backend(config: RunnerConfig) -> str:
    """The attention backend to build: the configured one, "torch" for an fp8 cache (refusing
    a backend that cannot read one)."""
    if config.kv_cache_dtype != "fp8_e4m3":
        return config.attention_backend
    if config.attention_backend not in ("auto", "torch"):
        raise ModelConfigError(
            f"kv_cache_dtype='fp8_e4m3' runs on the torch attention backend, not {config.attention_backend!r}"
        )
    return "torch"


def load_kv_scales(kv_cache: KVCache, config: RunnerConfig, model_dir: Path) -> int:
    """Sets an fp8 cache's scales from an FP8 checkpoint's per-layer k_scale / v_scale (the others
    stay 1.0); returns how many layers got a scale."""
    if not kv_cache.is_fp8 or config.load_format == "dummy" or fp8_checkpoint_layout(model_dir) is None:
        return 0
    found: dict[int, dict[str, float]] = {}
    for layer, kind, scale in fp8_kv_scales(model_dir, kv_cache.shape.num_layers):
        found.setdefault(layer, {})[kind] = scale
    for layer, scales in found.items():
        kv_cache.set_scales(layer, scales.get("k", 1.0), scales.get("v", 1.0))
    return len(found)
