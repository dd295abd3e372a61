"""Serving workloads through sglr-server: the app over an in-process engine, on uvicorn in a
background thread of this process (loopback), fed by `serving_load`'s streaming client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

_START_TIMEOUT_S = 60.0


@contextlib.contextmanager
def serve_engine(engine: Any) -> Iterator[str]:
    """Serves `engine` on a free loopback port; yields the base URL, stops the server at exit."""
    import uvicorn

    from sglr.server import build_app

    config = uvicorn.Config(build_app(engine), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="bench-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the benchmark's sglr-server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def send_all(base_url: str, requests: list[Any], seed: int) -> tuple[list[Any], float]:
    """Sends every request at once (native API, streaming); returns (outcomes, seconds)."""
    from serving_load import run_http

    options = argparse.Namespace(
        api="native", api_key=None, max_concurrency=None, request_rate=float("inf"), seed=seed
    )
    return asyncio.run(run_http(options, base_url, requests))
