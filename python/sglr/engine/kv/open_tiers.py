"""`open_tiers`: the second KV tier an engine config asks for, over a model runner's KV cache
(rank 0's, which decides), and `open_tier_follower`: another tensor-parallel rank's."""

from __future__ import annotations

from typing import Any

from sglr.engine.kv.hicache_config import HiCacheConfig
from sglr.engine.kv.page_keys import weights_fingerprint
from sglr.engine.kv.tier_follower import TierFollower
from sglr.engine.kv.tier_ops import KV_TIER_RECIPE
from sglr.engine.kv.tiers import KVTiers


def open_tiers(config: Any, runner: Any) -> KVTiers | None:
    """None when `enable_hierarchical_cache` is off. The pages' namespace fingerprints the
    runner's weights and KV layout (`page_keys.py`)."""
    if not config.enable_hierarchical_cache:
        return None
    settings, fingerprint = _rank_settings(config, runner)
    return KVTiers(settings, runner.kv_cache, fingerprint, getattr(runner, "tp", None))


def open_tier_follower(config: Any, runner: Any) -> TierFollower | None:
    """A rank other than 0: its tier, run by rank 0's orders (registered as the runner's
    `KV_TIER_RECIPE` hook); None when the tier is off. The caller closes it."""
    if not config.enable_hierarchical_cache:
        return None
    settings, fingerprint = _rank_settings(config, runner)
    follower = TierFollower(settings, runner.kv_cache, fingerprint, runner.tp)
    runner.recipe_hooks[KV_TIER_RECIPE] = follower.run
    return follower


def _rank_settings(config: Any, runner: Any) -> tuple[HiCacheConfig, bytes]:
    kv_cache = runner.kv_cache
    tp = getattr(runner, "tp", None)
    tp_rank, tp_size = (tp.rank, tp.size) if tp is not None else (0, 1)
    settings = HiCacheConfig.of(config, kv_cache.memory_bytes(), tp_rank, tp_size)
    assert settings is not None
    fingerprint = weights_fingerprint(
        runner.model, kv_cache.dtype, tuple(kv_cache.k_buffer.shape[2:]), tp_rank=tp_rank, tp_size=tp_size
    )
    return settings, fingerprint
