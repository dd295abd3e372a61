"""Engines on the seeded tiny model, shared per module (building one takes about a second)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sglr.engine.engine import Engine


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    from sglr.model.tiny import tiny_model_path

    return tiny_model_path("llama")


@pytest.fixture(scope="session")
def make_engine():
    """`make_engine(model_dir, **options)`: an engine with slot checks after every step."""
    return _make_engine


def _make_engine(model_dir: Path, **kwargs) -> Engine:
    kwargs.setdefault("debug_invariants", True)
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("max_total_tokens", 16384)
    return Engine(model_path=str(model_dir), **kwargs)


@pytest.fixture(scope="module")
def engine(tiny_dir: Path) -> Iterator[Engine]:
    eng = _make_engine(tiny_dir)
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def engine_no_cache(tiny_dir: Path) -> Iterator[Engine]:
    eng = _make_engine(tiny_dir, disable_radix_cache=True)
    yield eng
    eng.shutdown()
