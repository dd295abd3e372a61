"""Engines on the seeded tiny model, shared per module (building one takes about a second)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sglr.engine.engine import Engine


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    from sglr.testing.tiny import tiny_model_path

    return tiny_model_path("llama")


@pytest.fixture(scope="session")
def make_engine():
    """`make_engine(model_dir, **options)`: an engine with slot checks after every step."""
    return _make_engine


_ENGINES: list[Engine] = []


def _make_engine(model_dir: Path, **kwargs) -> Engine:
    kwargs.setdefault("debug_invariants", True)
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("max_total_tokens", 16384)
    engine = Engine(model_path=str(model_dir), **kwargs)
    _ENGINES.append(engine)
    return engine


def pytest_terminal_summary(terminalreporter) -> None:
    """How often the KV accounting was checked (after every engine step; a failure would have
    stopped that engine's loop and failed its tests)."""
    in_process = [engine for engine in _ENGINES if not engine.worker_pids]
    if in_process:
        num_checks = sum(engine.get_stats()["num_invariant_checks"] for engine in in_process)
        terminalreporter.write_line(
            f"engine tests: KV accounting checked after {num_checks} engine steps "
            f"({len(in_process)} in-process engines; worker engines check theirs in the worker)"
        )


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
