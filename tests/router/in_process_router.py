"""`InProcessRouter`: sglr-router's app over given worker URLs, served on a free loopback port
from an event loop in a thread of the test process (no health checks: the tests drive it)."""

from __future__ import annotations

import asyncio
import socket
import threading

from sglr.router import RouterConfig
from sglr.router.admin import build_router_app
from sglr.router.server import serve_router
from sglr.router.state import RouterSettings
from sglr.router.workers import WorkerPool


class InProcessRouter:
    def __init__(self, worker_urls: list[str], name: str = "test-router") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()
        self.pool = WorkerPool(worker_urls, RouterConfig())
        app = build_router_app(self.pool, RouterSettings(health_check_interval_s=3600.0))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        ready = threading.Event()
        self.stopping = asyncio.run_coroutine_threadsafe(_event(), self.loop).result(30)
        self.served = asyncio.run_coroutine_threadsafe(
            serve_router(app, sock, shutdown_timeout_s=2, on_ready=ready.set, stopping=self.stopping),
            self.loop,
        )
        assert ready.wait(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.served.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


async def _event() -> asyncio.Event:
    return asyncio.Event()
