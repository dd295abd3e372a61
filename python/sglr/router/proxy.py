"""Forwarding one generation request from `sglr-router` to a worker, streams included.

The request body goes to the worker byte for byte over a kept-alive connection
(`sglr.router.upstream`); it is parsed here only for routing (its key, and whether it
asks for a stream). The worker's status and body come back as they are (errors included), with
an `X-SGLR-Worker` header naming the worker; an event stream is relayed chunk by chunk as the
worker writes it. A worker that breaks off (connection refused or reset, or 503 while it shuts
down) before anything reached the client leaves the routable set and the request goes to
another worker, up to `max_retries` times. A stream that breaks off after events were relayed
ends with an error event and `data: [DONE]`, so the client sees a complete, failed stream. A
client that leaves closes the worker's connection, so the worker stops generating.

A request is a `_Forward` driven by the connections' protocol callbacks (route, send, answer
or retry), not a coroutine: no task, future or coroutine switch per request, which was a
large share of the router's CPU per request. Only opening a new worker connection awaits.
"""

from __future__ import annotations

import asyncio
import functools
import json
import json.scanner
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglr.errors import NoReplicaAvailableError
from sglr.http.errors import error_body
from sglr.http.sse import DONE, sse_event
from sglr.router.front import ClientConnection, ClientRequest
from sglr.router.keys import routing_key, scan_ids_request
from sglr.router.metrics import RouterMetrics
from sglr.router.upstream import UpstreamConnection, UpstreamPools, WorkerBrokeOff
from sglr.router.workers import Route, WorkerPool

logger = logging.getLogger("sglr.router")

WORKER_HEADER = "X-SGLR-Worker"
# Request headers that mean something to the worker; hop-by-hop ones stay behind.
_FORWARDED_HEADERS = frozenset((b"authorization", b"content-type", b"accept"))
# A worker answering this is shutting down or has lost its engine: try another one.
_RETRY_STATUS = 503
_JSON_SCAN = json.scanner.make_scanner(json.JSONDecoder())
_JSON_WHITESPACE = " \t\n\r"
_STREAM_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


@dataclass
class ProxyContext:
    pool: WorkerPool
    upstreams: UpstreamPools
    metrics: RouterMetrics
    max_retries: int
    request_timeout_s: float | None = None


def forward_generation(
    context: ProxyContext, client: ClientConnection, request: ClientRequest, path: str
) -> None:
    """Answers `request` from a worker, from callbacks (the client connection is `defer`red
    until the answer is complete)."""
    client.defer()
    _Forward(context, client, request, path).start()


def read_json_body(body: bytes) -> Any:
    """The body's JSON value, or None when it is not JSON (the worker answers it with its own
    400). Same result as `json.loads(body)`. The usual body (UTF-8, no leading whitespace) goes
    straight to the C scanner: `json.loads` first sniffs the encoding and matches whitespace
    with regexes, a sizeable part of parsing a small body."""
    try:
        text = body.decode()
        value, end = _JSON_SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        pass
    else:
        return value if end == len(text) or not text[end:].strip(_JSON_WHITESPACE) else None
    try:
        return json.loads(body)  # leading whitespace, UTF-16 / UTF-32, a BOM; or not JSON
    except (ValueError, RecursionError):
        return None


def _guarded(step: Callable[..., None]) -> Callable[..., None]:
    """A step that raises ends the request as a handler that raised would (500 if nothing
    was written, connection closed after it), instead of escaping into a transport callback."""

    @functools.wraps(step)
    def run(self: _Forward, *args: Any) -> None:
        try:
            step(self, *args)
        except Exception:
            if self.ended:  # the client has its answer: nothing to tell it
                logger.exception("request %s failed in the router after its answer", self.request.path)
                return
            self.client.handler_failed(self.request)
            self._end()

    return run


class _Forward:
    """One generation request on its way through the workers: route, connection, exchange,
    and after a worker broke off before anything reached the client, the next worker."""

    __slots__ = (
        "attempts",
        "client",
        "connection",
        "connections",
        "context",
        "ended",
        "fresh",
        "headers",
        "key",
        "path",
        "reasons",
        "request",
        "route",
        "started",
        "tail",
        "upstream_request",
        "wants_stream",
    )

    def __init__(self, context: ProxyContext, client: ClientConnection, request: ClientRequest, path: str) -> None:  # fmt: skip
        self.context = context
        self.client = client
        self.request = request
        self.path = path
        self.attempts = 0
        self.reasons: list[str] = []
        self.route: Route | None = None
        self.connection: UpstreamConnection | None = None
        self.fresh = self.ended = False
        self.tail = b""

    @_guarded
    def start(self) -> None:
        self.started = time.perf_counter()
        scanned = scan_ids_request(self.path, self.request.body)
        if scanned is None:
            payload = read_json_body(self.request.body)
            self.key = routing_key(self.path, payload)
            self.wants_stream = isinstance(payload, dict) and payload.get("stream") is True
        else:  # an id prompt: no Python int per id
            self.key, self.wants_stream = scanned
        self.headers = tuple(
            (name, value) for name, value in self.request.headers if name in _FORWARDED_HEADERS
        )
        self.client.on_lost = self._client_gone
        self._next_worker()

    def _next_worker(self) -> None:
        context = self.context
        if self.attempts > context.max_retries:
            self._give_up()
            return
        try:
            route = self.route = context.pool.route(self.key)
        except NoReplicaAvailableError:
            self._give_up()
            return
        routed_s = time.perf_counter() - self.started if self.attempts == 0 else None
        self.attempts += 1
        connections = self.connections = context.upstreams.get(route.worker.url)
        self.upstream_request = connections.post(self.request.path, self.headers, self.request.body)
        self.fresh = False
        self._connect()
        if routed_s is not None:  # counted once the request is on its way
            context.metrics.route_seconds.observe(routed_s)

    def _connect(self) -> None:
        # A reused connection the worker closed as idle just as the request went out is
        # retried once on a new one (`fresh`); any other failure is the worker's.
        connection = None if self.fresh else self.connections.take_idle()
        if connection is not None:
            self._exchange(connection)
            return
        self.fresh = True
        opening = asyncio.get_running_loop().create_task(self.connections.open())
        opening.add_done_callback(self._opened)

    @_guarded
    def _opened(self, opening: asyncio.Task[UpstreamConnection]) -> None:
        if opening.cancelled():  # the router is shutting down
            self._client_left()
            return
        error = opening.exception()
        if error is not None:
            if not isinstance(error, WorkerBrokeOff):
                raise error
            self._ready(error)
            return
        connection = opening.result()
        if self.client.lost:
            connection.release()
            self._client_left()
            return
        self._exchange(connection)

    def _exchange(self, connection: UpstreamConnection) -> None:
        self.connection = connection
        connection.send(
            self.upstream_request,
            stream=self.wants_stream,
            timeout_s=self.context.request_timeout_s,
            on_ready=self._ready,
        )

    @_guarded
    def _ready(self, error: WorkerBrokeOff | None) -> None:
        if error is not None:
            if self.client.lost:
                self._client_left()
            elif error.stale and not self.fresh:
                self.fresh = True
                self._connect()
            else:
                self._worker_broke_off(error)
            return
        connection = self.connection
        assert connection is not None and self.route is not None
        if connection.status == _RETRY_STATUS:
            connection.close()
            self._worker_broke_off(WorkerBrokeOff("answered 503"))
            return
        worker = self.route.worker
        worker_header = (b"x-sglr-worker", worker.url.encode())
        if connection.is_stream:
            self._relay(connection, worker_header)
            return
        content_type = connection.content_type
        headers = (
            [(b"content-type", content_type), worker_header] if content_type is not None else [worker_header]
        )
        # The answer first, the bookkeeping after: nothing else runs on the loop in between.
        self.client.respond(connection.status, headers, connection.body())
        connection.release()
        self.context.pool.finish(self.route)
        self.context.metrics.count(worker.url, "ok" if connection.status < 400 else "error_status")
        self._end()

    def _worker_broke_off(self, error: WorkerBrokeOff) -> None:
        """The worker failed before anything reached the client: it leaves routing and the
        request goes to the next one."""
        route = self.route
        assert route is not None
        url = route.worker.url
        _broke_off(self.context, route, str(error))
        self.reasons.append(f"{url}: {error}")
        self.context.metrics.count(url, "retried")
        logger.warning("worker %s broke off before replying (%s); retrying elsewhere", url, error)
        self._next_worker()

    def _give_up(self) -> None:
        if not self.reasons:
            self.context.metrics.no_worker.inc()
            self.client.respond_error(503, "no healthy worker is available")
        else:
            self.client.respond_error(502, "every worker tried broke off: " + "; ".join(self.reasons))
        self._end()

    def _relay(self, connection: UpstreamConnection, worker_header: tuple[bytes, bytes]) -> None:
        client = self.client
        first = connection.body()
        content_type = connection.content_type or b"text/event-stream"
        client.start_chunked(200, [(b"content-type", content_type), *_STREAM_HEADERS, worker_header], first)
        self.tail = first
        client.on_pause_writing = connection.pause_reading
        client.on_resume_writing = connection.resume_reading
        connection.relay_to(self._relay_chunk, self._stream_ended)

    def _relay_chunk(self, chunk: bytes) -> None:
        self.client.write_chunk(chunk)
        self.tail = chunk

    @_guarded
    def _stream_ended(self, error: WorkerBrokeOff | None) -> None:
        client, route, connection = self.client, self.route, self.connection
        assert route is not None and connection is not None
        failed = False
        try:
            if error is not None and not client.lost:
                failed = True
                self.context.pool.mark_failed(route.worker, str(error))
                logger.warning("worker %s broke off a stream: %s", route.worker.url, error)
                # Close a half-sent event first so the error arrives as an event of its own.
                tail = self.tail
                separator = b"" if tail.endswith(b"\n\n") or not tail else b"\n\n"
                message = f"worker {route.worker.url} failed mid-stream: {error}"
                client.write_chunk(separator + sse_event(error_body(502, message)) + DONE)
        finally:
            client.on_pause_writing = client.on_resume_writing = None
            connection.release()
            client.end_chunked()
            self.context.pool.finish(route, failed=failed)
            # Neither: the client left first (the worker aborts when its connection closes).
            outcome = "failed" if failed else "ok" if error is None else "client_left"
            self.context.metrics.count(route.worker.url, outcome)
        self._end()

    def _client_gone(self) -> None:
        if self.connection is not None:
            self.connection.close()

    def _client_left(self) -> None:
        """Nobody waits for the answer any more (the route was not finished yet)."""
        route = self.route
        assert route is not None
        self.context.pool.finish(route)
        self.context.metrics.count(route.worker.url, "client_left")
        self._end()

    def _end(self) -> None:
        self.ended = True
        self.client.on_lost = None
        self.client.answered()


def _broke_off(context: ProxyContext, route: Route, reason: str) -> None:
    context.pool.mark_failed(route.worker, reason)
    context.pool.finish(route, failed=True)
