"""An ASGI app served by uvicorn on a free loopback port in a background thread (tests,
benchmarks and in-process embedding; `sglr-server` itself runs uvicorn in the foreground)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def serve_in_background(app: Any, start_timeout_s: float = 30.0, **uvicorn_options: Any) -> Iterator[str]:
    """Yields the base URL (`http://127.0.0.1:PORT`) once the server accepts connections; stops
    it on exit. Raises RuntimeError when it has not started within `start_timeout_s`."""
    import uvicorn

    from sglr.http.bounded_protocol import BoundedHttpToolsProtocol

    options = {"log_level": "warning", "http": BoundedHttpToolsProtocol, **uvicorn_options}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, **options))
    thread = threading.Thread(target=server.run, name="sglr-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the background server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
