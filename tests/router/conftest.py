"""Router test fixtures: the tiny model that `sglr-server` workers serve in the process tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    from sglr.testing.tiny import tiny_model_path

    return tiny_model_path("llama")
