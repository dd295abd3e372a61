"""Serving workloads through sglr-server: the app over an in-process engine, on uvicorn in a
background thread of this process (loopback), fed by `serving_load`'s streaming client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

_START_TIMEOUT_S = 60.0


@contextlib.contextmanager
def serve_engine(engine: Any) -> Iterator[str]:
    """Serves `engine` on a free loopback port; yields the base URL, stops the server at exit."""
    from sglr.http.background import serve_in_background
    from sglr.server import build_app

    with serve_in_background(build_app(engine), start_timeout_s=_START_TIMEOUT_S) as url:
        yield url


def send_all(base_url: str, requests: list[Any], seed: int) -> tuple[list[Any], float]:
    """Sends every request at once (native API, streaming); returns (outcomes, seconds)."""
    from serving_load import run_http

    options = argparse.Namespace(
        api="native", api_key=None, max_concurrency=None, request_rate=float("inf"), seed=seed
    )
    return asyncio.run(run_http(options, base_url, requests))
