"""Runs an ASGI app with uvicorn on a free loopback port in a background thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sglr.http.background import serve_in_background


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    with serve_in_background(app, log_level="error", lifespan="off") as url:
        yield url
