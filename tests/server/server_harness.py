"""Helpers for server tests: real uvicorn servers on 127.0.0.1 over tiny-model engines."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from sglr.engine.engine import Engine
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
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def make_engine(model_dir: Path, **kwargs) -> Engine:
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("max_total_tokens", 16384)
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
