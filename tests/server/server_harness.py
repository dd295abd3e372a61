"""Helpers for server tests: real uvicorn servers on 127.0.0.1 over tiny-model engines."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sglr.engine.engine import Engine
from sglr.http.background import serve_in_background
from sglr.server import ServerSettings, build_app


@dataclass
class Served:
    engine: Engine
    url: str

    def wait_idle(self, timeout: float = 10.0) -> dict:
        """Engine stats once nothing runs or waits (fails after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.engine.get_stats()
            if stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0:
                return stats
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine is still busy after {timeout}s: {stats}")
            time.sleep(0.01)

    def assert_no_leaks(self) -> None:
        stats = self.wait_idle()
        self.engine.check_invariants()
        assert stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    """Runs `app` with uvicorn on a free loopback port in a background thread."""
    with serve_in_background(app, timeout_graceful_shutdown=5) as url:
        yield url


def make_engine(model_dir: Path, **kwargs) -> Engine:
    """A tiny-model engine; `SGLR_TEST_SERVER_TP=2` runs the server suite against engines of
    two tensor-parallel worker processes (scripts/test does both)."""
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("max_total_tokens", 16384)
    tp_size = int(os.environ.get("SGLR_TEST_SERVER_TP", "1"))
    if tp_size > 1:
        kwargs.setdefault("tp_size", tp_size)
    return Engine(model_path=str(model_dir), **kwargs)


@contextlib.contextmanager
def served_engine(
    model_dir: Path, settings: ServerSettings | None = None, **engine_kwargs
) -> Iterator[Served]:
    engine = make_engine(model_dir, **engine_kwargs)
    try:
        with serve(build_app(engine, settings)) as url:
            yield Served(engine, url)
    finally:
        engine.shutdown()
