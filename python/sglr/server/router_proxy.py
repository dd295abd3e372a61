"""Forwarding one generation request from `sglr-router` to a worker, streams included.

The request body goes to the worker byte for byte; the worker's status and body come back as
they are (errors included), with an `X-SGLR-Worker` header naming the worker. A worker that
breaks off (connection refused or reset, or 503 while it shuts down) before anything reached
the client leaves the routable set and the request goes to another worker, up to
`max_retries` times. A stream that breaks off after events were relayed ends with an error
event and `data: [DONE]`, so the client sees a complete, failed stream.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from sglr.errors import NoReplicaAvailableError
from sglr.router.keys import routing_key
from sglr.router.workers import Route, WorkerPool
from sglr.server.errors import error_body, error_response
from sglr.server.router_metrics import RouterMetrics
from sglr.server.sse import DONE, sse_event

logger = logging.getLogger("sglr.router")

WORKER_HEADER = "X-SGLR-Worker"
# Request headers that mean something to the worker; hop-by-hop ones stay behind.
_FORWARDED_HEADERS = ("authorization", "content-type", "accept")
# A worker answering this is shutting down or has lost its engine: try another one.
_RETRY_STATUS = 503
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class ProxyContext:
    pool: WorkerPool
    client: httpx.AsyncClient
    metrics: RouterMetrics
    max_retries: int


class _WorkerBrokeOff(Exception):
    pass


async def forward_generation(context: ProxyContext, request: Request, path: str) -> Response:
    body = await request.body()
    started = time.perf_counter()
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        payload = None  # the worker answers it with its own 400
    key = routing_key(path, payload)
    wants_stream = isinstance(payload, dict) and payload.get("stream") is True
    headers = {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers}
    reasons: list[str] = []
    for attempt in range(context.max_retries + 1):
        try:
            route = context.pool.route(key)
        except NoReplicaAvailableError:
            break
        if attempt == 0:
            context.metrics.route_seconds.observe(time.perf_counter() - started)
        try:
            return await _send(context, route, path, body, headers, wants_stream)
        except _WorkerBrokeOff as exc:
            reasons.append(f"{route.worker.url}: {exc}")
            context.metrics.count(route.worker.url, "retried")
            logger.warning(
                "worker %s broke off before replying (%s); retrying elsewhere", route.worker.url, exc
            )
    if not reasons:
        context.metrics.no_worker.inc()
        return error_response(503, "no healthy worker is available")
    return error_response(502, "every worker tried broke off: " + "; ".join(reasons))


async def _send(
    context: ProxyContext, route: Route, path: str, body: bytes, headers: dict[str, str], wants_stream: bool
) -> Response:
    """The worker's response, or `_WorkerBrokeOff` (route finished, worker marked failed)
    when the request can still go elsewhere. Finishes `route` exactly once."""
    worker = route.worker
    client = context.client
    try:
        upstream = await client.send(client.build_request("POST", worker.url + path, content=body, headers=headers), stream=True)  # fmt: skip
    except httpx.TransportError as exc:
        _broke_off(context, route, exc)
        raise _WorkerBrokeOff(_describe(exc)) from None
    is_stream = wants_stream and upstream.headers.get("content-type", "").startswith("text/event-stream")
    try:
        if upstream.status_code == _RETRY_STATUS:
            await upstream.aread()
            raise _WorkerBrokeOff("answered 503")
        if not is_stream:
            content = await upstream.aread()
            await upstream.aclose()
            context.pool.finish(route)
            outcome = "ok" if upstream.status_code < 400 else "error_status"
            context.metrics.count(worker.url, outcome)
            return Response(
                content,
                status_code=upstream.status_code,
                headers={WORKER_HEADER: worker.url},
                media_type=upstream.headers.get("content-type"),
            )
        chunks = upstream.aiter_raw()
        first = await anext(chunks, b"")
    except httpx.TransportError as exc:
        await upstream.aclose()
        _broke_off(context, route, exc)
        raise _WorkerBrokeOff(_describe(exc)) from None
    except _WorkerBrokeOff:
        await upstream.aclose()
        _broke_off(context, route, None)
        raise
    return StreamingResponse(
        _relay(context, route, upstream, chunks, first),
        media_type="text/event-stream",
        headers={**_STREAM_HEADERS, WORKER_HEADER: worker.url},
    )


async def _relay(
    context: ProxyContext,
    route: Route,
    upstream: httpx.Response,
    chunks: AsyncIterator[bytes],
    first: bytes,
) -> AsyncIterator[bytes]:
    failed = completed = False
    try:
        yield first
        tail = first
        try:
            async for chunk in chunks:
                yield chunk
                tail = chunk
            completed = True
        except httpx.TransportError as exc:
            failed = True
            context.pool.mark_failed(route.worker, _describe(exc))
            logger.warning("worker %s broke off a stream: %s", route.worker.url, _describe(exc))
            # Close a half-sent event first so the error arrives as an event of its own.
            separator = b"" if tail.endswith(b"\n\n") or not tail else b"\n\n"
            message = f"worker {route.worker.url} failed mid-stream: {_describe(exc)}"
            yield separator + sse_event(error_body(502, message)) + DONE
    finally:
        await upstream.aclose()
        context.pool.finish(route, failed=failed)
        # Neither: the client left first (the worker aborts when its connection closes).
        outcome = "failed" if failed else "ok" if completed else "client_left"
        context.metrics.count(route.worker.url, outcome)


def _broke_off(context: ProxyContext, route: Route, exc: BaseException | None) -> None:
    context.pool.mark_failed(route.worker, _describe(exc) if exc else "answered 503")
    context.pool.finish(route, failed=True)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
