"""Forwarding one generation request from `sglr-router` to a worker, streams included.

The request body goes to the worker byte for byte over a kept-alive connection
(`sglr.server.router_upstream`); it is parsed here only for routing (its key, and whether it
asks for a stream). The worker's status and body come back as they are (errors included), with
an `X-SGLR-Worker` header naming the worker; an event stream is relayed chunk by chunk as the
worker writes it. A worker that breaks off (connection refused or reset, or 503 while it shuts
down) before anything reached the client leaves the routable set and the request goes to
another worker, up to `max_retries` times. A stream that breaks off after events were relayed
ends with an error event and `data: [DONE]`, so the client sees a complete, failed stream. A
client that leaves closes the worker's connection, so the worker stops generating.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from sglr.errors import NoReplicaAvailableError
from sglr.router.keys import routing_key
from sglr.router.workers import Route, WorkerPool
from sglr.server.errors import error_body
from sglr.server.router_front import ClientConnection, ClientRequest
from sglr.server.router_metrics import RouterMetrics
from sglr.server.router_upstream import UpstreamConnection, UpstreamPools, WorkerBrokeOff, request_head
from sglr.server.sse import DONE, sse_event

logger = logging.getLogger("sglr.router")

WORKER_HEADER = "X-SGLR-Worker"
# Request headers that mean something to the worker; hop-by-hop ones stay behind.
_FORWARDED_HEADERS = frozenset((b"authorization", b"content-type", b"accept"))
# A worker answering this is shutting down or has lost its engine: try another one.
_RETRY_STATUS = 503
_STREAM_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


@dataclass
class ProxyContext:
    pool: WorkerPool
    upstreams: UpstreamPools
    metrics: RouterMetrics
    max_retries: int
    request_timeout_s: float | None = None


class _ClientLeft(Exception):
    pass


async def forward_generation(
    context: ProxyContext, client: ClientConnection, request: ClientRequest, path: str
) -> None:
    body = request.body
    started = time.perf_counter()
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        payload = None  # the worker answers it with its own 400
    key = routing_key(path, payload)
    wants_stream = isinstance(payload, dict) and payload.get("stream") is True
    headers = [(name, value) for name, value in request.headers if name in _FORWARDED_HEADERS]
    reasons: list[str] = []
    for attempt in range(context.max_retries + 1):
        try:
            route = context.pool.route(key)
        except NoReplicaAvailableError:
            break
        if attempt == 0:
            context.metrics.route_seconds.observe(time.perf_counter() - started)
        connections = context.upstreams.get(route.worker.url)
        upstream_request = (
            request_head(connections.address, b"POST", path.encode(), headers, len(body)) + body
        )
        try:
            await _send(context, client, route, upstream_request, wants_stream)
            return
        except _ClientLeft:
            context.pool.finish(route)
            context.metrics.count(route.worker.url, "client_left")
            return
        except WorkerBrokeOff as exc:
            reasons.append(f"{route.worker.url}: {exc}")
            context.metrics.count(route.worker.url, "retried")
            logger.warning(
                "worker %s broke off before replying (%s); retrying elsewhere", route.worker.url, exc
            )
    if not reasons:
        context.metrics.no_worker.inc()
        client.respond_error(503, "no healthy worker is available")
        return
    client.respond_error(502, "every worker tried broke off: " + "; ".join(reasons))


async def _send(
    context: ProxyContext, client: ClientConnection, route: Route, request: bytes, wants_stream: bool
) -> None:
    """Answers the client from the worker, or raises `WorkerBrokeOff` (route finished, worker
    marked failed) when the request can still go elsewhere, or `_ClientLeft` (route not
    finished) when nobody is waiting any more."""
    worker = route.worker
    connections = context.upstreams.get(worker.url)
    connection: UpstreamConnection | None = None

    def client_gone() -> None:
        if connection is not None:
            connection.close()

    client.on_lost = client_gone
    try:
        # A reused connection the worker closed as idle just as the request went out is
        # retried once on a new one; any other failure is the worker's.
        for fresh in (False, True):
            try:
                connection = await connections.acquire(fresh=fresh)
                if client.lost:
                    connection.release()
                    raise _ClientLeft
                await connection.exchange(request, stream=wants_stream, timeout_s=context.request_timeout_s)
                break
            except WorkerBrokeOff as exc:
                if client.lost:
                    raise _ClientLeft from None
                if exc.stale and not fresh:
                    continue
                _broke_off(context, route, str(exc))
                raise
        assert connection is not None
        if connection.status == _RETRY_STATUS:
            connection.close()
            _broke_off(context, route, "answered 503")
            raise WorkerBrokeOff("answered 503")
        worker_header = (b"x-sglr-worker", worker.url.encode())
        if not connection.is_stream:
            content = connection.body()
            connection.release()
            context.pool.finish(route)
            context.metrics.count(worker.url, "ok" if connection.status < 400 else "error_status")
            content_type = connection.content_type
            headers = [(b"content-type", content_type)] if content_type is not None else []
            client.respond(connection.status, [*headers, worker_header], content)
            return
        await _relay(context, client, route, connection, worker_header)
    finally:
        client.on_lost = None


async def _relay(
    context: ProxyContext,
    client: ClientConnection,
    route: Route,
    connection: UpstreamConnection,
    worker_header: tuple[bytes, bytes],
) -> None:
    assert connection.done is not None
    first = connection.body()
    content_type = connection.content_type or b"text/event-stream"
    client.start_chunked(200, [(b"content-type", content_type), *_STREAM_HEADERS, worker_header], first)
    tail = first

    def sink(chunk: bytes) -> None:
        nonlocal tail
        client.write_chunk(chunk)
        tail = chunk

    connection.relay_to(sink)
    client.on_pause_writing = connection.pause_reading
    client.on_resume_writing = connection.resume_reading
    failed = completed = False
    try:
        await connection.done
        completed = True
    except WorkerBrokeOff as exc:
        if not client.lost:
            failed = True
            context.pool.mark_failed(route.worker, str(exc))
            logger.warning("worker %s broke off a stream: %s", route.worker.url, exc)
            # Close a half-sent event first so the error arrives as an event of its own.
            separator = b"" if tail.endswith(b"\n\n") or not tail else b"\n\n"
            message = f"worker {route.worker.url} failed mid-stream: {exc}"
            client.write_chunk(separator + sse_event(error_body(502, message)) + DONE)
    finally:
        client.on_pause_writing = client.on_resume_writing = None
        connection.release()
        client.end_chunked()
        context.pool.finish(route, failed=failed)
        # Neither: the client left first (the worker aborts when its connection closes).
        outcome = "failed" if failed else "ok" if completed else "client_left"
        context.metrics.count(route.worker.url, outcome)


def _broke_off(context: ProxyContext, route: Route, reason: str) -> None:
    context.pool.mark_failed(route.worker, reason)
    context.pool.finish(route, failed=True)
