"""Fixtures for model tests: cached tiny checkpoints (built once per machine) and their
`transformers` twins. Triton runs in its CPU interpreter when there is no CUDA device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    # Triton reads this when a kernel module is imported; set it before any test imports one.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from sglr.testing.tiny import tiny_model_path


@pytest.fixture
def gguf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory that is also this test's GGUF conversion cache."""
    monkeypatch.setenv("SGLR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_path(request: pytest.FixtureRequest) -> Path:
    return tiny_model_path(request.param)
