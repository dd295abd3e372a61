"""`open_tiers`: the second KV tier an engine config asks for, over a model runner's KV cache."""

from __future__ import annotations

from typing import Any

from sglr.engine.kv.hicache_config import HiCacheConfig
from sglr.engine.kv.page_keys import weights_fingerprint
from sglr.engine.kv.tiers import KVTiers


def open_tiers(config: Any, runner: Any) -> KVTiers | None:
    """None when `enable_hierarchical_cache` is off. The pages' namespace fingerprints the
    runner's weights and KV layout (`page_keys.py`)."""
    if not config.enable_hierarchical_cache:
        return None
    kv_cache = runner.kv_cache
    settings = HiCacheConfig.of(config, kv_cache.memory_bytes())
    assert settings is not None
    tp = getattr(runner, "tp", None)
    fingerprint = weights_fingerprint(
        runner.model,
        kv_cache.dtype,
        tuple(kv_cache.k_buffer.shape[2:]),
        tp_rank=getattr(tp, "rank", 0) if tp is not None else 0,
        tp_size=getattr(tp, "size", 1) if tp is not None else 1,
    )
    return KVTiers(settings, kv_cache, fingerprint)
