"""Fixtures for language tests that run on the in-process engine (seeded tiny model, CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lang_engine import make_tiny_engine


@pytest.fixture(scope="session")
def tiny_llama_dir() -> Path:
    from sglr.testing.tiny import tiny_model_path

    return tiny_model_path("llama")


@pytest.fixture(scope="session")
def tiny_engine(tiny_llama_dir: Path) -> Iterator:
    """One engine for the session's language tests (stats are shared: compare differences)."""
    engine = make_tiny_engine(tiny_llama_dir)
    yield engine
    engine.shutdown()
