"""`serve_router(app, sock)`: `sglr-router`'s HTTP server, one port for everything.

Generation requests (`POST`/`PUT` on `/generate`, `/v1/completions`, `/v1/chat/completions`)
take the fast path: parsed by `sglr.router.front`, authorized here, forwarded by
`sglr.router.proxy` over kept-alive worker connections from protocol callbacks, with
no ASGI, no HTTP client library and no task per request (the Python HTTP hop through uvicorn
and httpx cost ~2 ms a request; benches/results/router_dp_cpu.md). Everything else goes to
the admin app (`sglr.router.admin`) through `sglr.router.asgi_bridge`.

SIGTERM / SIGINT: the port stops accepting, idle connections close, requests in flight get
`shutdown_timeout_s` to finish (a second SIGINT stops waiting), then the rest are cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from sglr.http.auth import UNAUTHORIZED_MESSAGE, bearer_token_matches, is_public, key_digest
from sglr.http.errors import error_body
from sglr.http.jsonout import dumps
from sglr.router.asgi_bridge import run_asgi
from sglr.router.front import ClientConnection, ClientRequest, Dispatch
from sglr.router.health import check_health_forever
from sglr.router.keys import GENERATION_PATHS
from sglr.router.proxy import ProxyContext, forward_generation
from sglr.router.state import RouterState
from sglr.router.upstream import UpstreamPools

_GENERATION_PATHS = {path.encode(): path for path in GENERATION_PATHS}
_GENERATION_METHODS = (b"POST", b"PUT")
_UNAUTHORIZED_HEADERS = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]


def build_dispatch(app: Any, state: RouterState) -> Dispatch:
    api_key = state.settings.api_key
    expected_digest = key_digest(api_key.encode()) if api_key is not None else None

    def dispatch(connection: ClientConnection, request: ClientRequest) -> Awaitable[None] | None:
        path = _GENERATION_PATHS.get(request.path)
        if path is None:
            return run_asgi(app, connection, request)
        # The key before the method, as the admin app's middleware does: without it, a client
        # learns nothing about a route.
        if (
            expected_digest is not None
            and not bearer_token_matches(request.header(b"authorization"), expected_digest)
            and not is_public(request.method.decode("latin-1"), path)
        ):
            connection.respond(401, _UNAUTHORIZED_HEADERS, dumps(error_body(401, UNAUTHORIZED_MESSAGE)))
            return None
        if request.method not in _GENERATION_METHODS:
            body = dumps(error_body(405, "Method Not Allowed"))
            connection.respond(405, [(b"content-type", b"application/json"), (b"allow", b"POST, PUT")], body)
            return None
        assert state.proxy is not None
        forward_generation(state.proxy, connection, request, path)
        return None

    return dispatch


@contextlib.asynccontextmanager
async def router_lifespan(state: RouterState) -> AsyncIterator[None]:
    """The router's connections to its workers and its health checks, for as long as it runs."""
    settings = state.settings
    timeout = httpx.Timeout(settings.request_timeout_s, connect=settings.connect_timeout_s)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=16)
    upstreams = UpstreamPools(settings.connect_timeout_s)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        state.client = client
        state.proxy = ProxyContext(
            state.pool, upstreams, state.metrics, settings.max_retries, settings.request_timeout_s
        )
        checker = asyncio.create_task(check_health_forever(state))
        try:
            yield
        finally:
            checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checker
            upstreams.close()


async def serve_router(
    app: Any,
    sock: socket.socket,
    *,
    shutdown_timeout_s: float = 10.0,
    on_ready: Callable[[], None] = lambda: None,
    stopping: asyncio.Event | None = None,
) -> None:
    """Serves until SIGTERM / SIGINT, or until `stopping` is set when given (then no signal
    handlers are installed: an embedding thread has none to install)."""
    state: RouterState = app.state.sglr_router
    loop = asyncio.get_running_loop()
    forced = asyncio.Event()
    handle_signals = stopping is None
    stop = stopping if stopping is not None else asyncio.Event()

    def on_signal(sig: int) -> None:
        if stop.is_set() and sig == signal.SIGINT:
            forced.set()  # a second Ctrl-C: stop waiting for requests
        stop.set()

    if handle_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
    connections: set[ClientConnection] = set()
    try:
        async with router_lifespan(state):
            dispatch = build_dispatch(app, state)
            max_body_bytes = state.settings.max_body_bytes
            server = await loop.create_server(
                lambda: ClientConnection(dispatch, connections, max_body_bytes), sock=sock
            )
            on_ready()
            await stop.wait()
            server.close()
            await _drain(connections, shutdown_timeout_s, forced)
    finally:
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


async def _drain(connections: set[ClientConnection], timeout_s: float, forced: asyncio.Event) -> None:
    for connection in list(connections):
        connection.close_when_idle()
    deadline = time.monotonic() + timeout_s
    while any(c.busy for c in connections) and time.monotonic() < deadline and not forced.is_set():
        await asyncio.sleep(0.05)
    for connection in list(connections):
        if connection.transport is not None:
            connection.transport.abort()
    await asyncio.sleep(0)  # let the aborted requests' handlers see their clients go
