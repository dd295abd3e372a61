"""Server test fixtures: real uvicorn servers on 127.0.0.1 over engines on the seeded tiny model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lora_support import LoraSet
from server_harness import Served, served_engine

from sglr.server import ServerSettings


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    from sglr.testing.tiny import tiny_model_path

    return tiny_model_path("llama")


@pytest.fixture(scope="module")
def served(tiny_dir: Path) -> Iterator[Served]:
    """The default test server: metrics on, slot checks after every engine step."""
    with served_engine(tiny_dir, ServerSettings(enable_metrics=True), debug_invariants=True) as s:
        yield s


@pytest.fixture(scope="session")
def fuzzed(tiny_dir: Path) -> Iterator[Served]:
    """The fuzz modules' server (test_fuzz_*.py): a short context keeps whatever they draw cheap."""
    from fuzz_fields import FUZZ_CONTEXT_LEN

    settings = ServerSettings(enable_metrics=True)
    with served_engine(tiny_dir, settings, debug_invariants=True, context_length=FUZZ_CONTEXT_LEN) as s:
        yield s


@pytest.fixture(scope="session")
def lora_set(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> LoraSet:
    """PEFT adapters of the tiny model for the LoRA server tests (`lora_support.py`)."""
    from lora_support import write_lora_set

    return write_lora_set(tiny_dir, tmp_path_factory.mktemp("served-lora"))
