"""`sglr-server`'s flags of the second KV tier: SGLang's HiCache names (docs/kv-tiers.md), one
per `hicache_*` engine option, which `engine/kv/hicache_config.py` checks."""

from __future__ import annotations

import argparse
from typing import Any

from sglr.engine.kv.hicache_config import PREFETCH_POLICIES, STORAGE_BACKENDS, WRITE_POLICIES


def add_hicache_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--enable-hierarchical-cache",
        action="store_true",
        help="a second KV tier under the device pool (pages on local disk)",
    )
    add("--hicache-ratio", type=float, default=2.0, help="the tier's size over the device pool's (2.0)")
    add("--hicache-size", type=float, default=0.0, help="the tier's size in GB; overrides --hicache-ratio")
    add("--hicache-write-policy", choices=WRITE_POLICIES, default="write_through")
    add(
        "--hicache-storage-backend",
        choices=STORAGE_BACKENDS,
        default=None,
        help="file: keep the pages in --hicache-storage-dir across restarts",
    )
    add("--hicache-storage-dir", default=None, help="the file backend's directory (one server each)")
    add(
        "--hicache-storage-prefetch-policy",
        choices=PREFETCH_POLICIES,
        default="best_effort",
        help="how long admission waits for stored pages being read (file backend)",
    )
    add("--hicache-page-size", type=int, default=64, help="tokens per stored page (64)")


def hicache_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "enable_hierarchical_cache": args.enable_hierarchical_cache,
        "hicache_ratio": args.hicache_ratio,
        "hicache_size": args.hicache_size,
        "hicache_write_policy": args.hicache_write_policy,
        "hicache_storage_backend": args.hicache_storage_backend,
        "hicache_storage_dir": args.hicache_storage_dir,
        "hicache_storage_prefetch_policy": args.hicache_storage_prefetch_policy,
        "hicache_page_size": args.hicache_page_size,
    }
