"""`HiCacheConfig`: the settings of the KV tier under the device pool (SGLang's HiCache names).

`EngineConfig` holds the options; `check_hicache` refuses bad combinations when the engine config
is built, `HiCacheConfig.of` reads them for the pool.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from sglr.errors import EngineConfigError

WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
STORAGE_BACKENDS = ("file",)
PREFETCH_POLICIES = ("best_effort", "wait_complete", "timeout")
# write_through_selective writes a page once this many requests have used it (SGLang's value).
SELECTIVE_WRITE_THRESHOLD = 2


@dataclass(frozen=True)
class HiCacheConfig:
    """page_size: tokens per stored page (only whole pages are stored). capacity_bytes: the
    tier's bound. directory: the file backend's directory (None: a private temporary one, removed
    at close: the tier then lasts as long as the engine)."""

    write_policy: str
    prefetch_policy: str
    page_size: int
    capacity_bytes: int
    directory: str | None

    @classmethod
    def of(
        cls, config: Any, device_pool_bytes: int, tp_rank: int = 0, tp_size: int = 1
    ) -> HiCacheConfig | None:
        """The tier of an engine config (None when it is off). `hicache_size` (GB) overrides
        `hicache_ratio` times the device pool's bytes (per rank: each holds its own KV heads).
        Under tensor parallelism each rank keeps its pages in its own subdirectory."""
        if not config.enable_hierarchical_cache:
            return None
        if config.hicache_size:
            capacity = int(config.hicache_size * 2**30)
        else:
            capacity = int(config.hicache_ratio * device_pool_bytes)
        return cls(
            write_policy=config.hicache_write_policy,
            prefetch_policy=config.hicache_storage_prefetch_policy,
            page_size=config.hicache_page_size,
            capacity_bytes=capacity,
            directory=rank_directory(
                config.hicache_storage_dir if config.hicache_storage_backend == "file" else None,
                tp_rank,
                tp_size,
            ),
        )


def rank_directory(directory: str | None, tp_rank: int, tp_size: int) -> str | None:
    """A rank's page directory: `directory` itself without tensor parallelism, else its
    `tp<size>-rank<rank>` subdirectory (one lock and one byte bound per rank)."""
    if directory is None or tp_size == 1:
        return directory
    return os.path.join(directory, f"tp{tp_size}-rank{tp_rank}")


def check_hicache(config: Any) -> None:
    """Raises `EngineConfigError` naming the option that is wrong."""
    _one_of("hicache_write_policy", config.hicache_write_policy, WRITE_POLICIES)
    _one_of("hicache_storage_prefetch_policy", config.hicache_storage_prefetch_policy, PREFETCH_POLICIES)
    if config.hicache_storage_backend is not None:
        _one_of("hicache_storage_backend", config.hicache_storage_backend, STORAGE_BACKENDS)
    if not isinstance(config.hicache_page_size, int) or config.hicache_page_size < 1:
        raise EngineConfigError(
            f"hicache_page_size must be a positive integer, got {config.hicache_page_size!r}"
        )
    if not config.hicache_ratio > 0 or config.hicache_size < 0:
        raise EngineConfigError(
            f"hicache_ratio must be positive and hicache_size >= 0, got {config.hicache_ratio}, {config.hicache_size}"
        )
    if not config.enable_hierarchical_cache:
        if config.hicache_storage_backend is not None:
            raise EngineConfigError("hicache_storage_backend needs enable_hierarchical_cache")
        return
    if config.disable_radix_cache:
        raise EngineConfigError(
            "enable_hierarchical_cache needs the radix cache (disable_radix_cache is set)"
        )
    if config.is_embedding:
        raise EngineConfigError("enable_hierarchical_cache serves generation only")
    if config.hicache_storage_backend == "file" and not config.hicache_storage_dir:
        raise EngineConfigError("hicache_storage_backend='file' needs hicache_storage_dir")


def _one_of(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise EngineConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
