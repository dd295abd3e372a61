"""Builds in-process engines on the seeded tiny model for language tests (CPU)."""

from __future__ import annotations

from pathlib import Path


def make_tiny_engine(model_dir: Path, **options):
    from sglr.engine.engine import Engine

    options.setdefault("device", "cpu")
    options.setdefault("max_total_tokens", 16384)
    options.setdefault("debug_invariants", True)
    return Engine(model_path=str(model_dir), **options)
