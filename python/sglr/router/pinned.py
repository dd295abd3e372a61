"""Routes whose state a worker stores: `/v1/files*`, `/v1/batches*` and `/v1/responses*` all go
to ONE worker, the first healthy one in worker order, so a file uploaded, a batch started or a
response created through the router is found again through it (another replica has no record of
it). The answer is streamed back as it comes (a streamed `POST /v1/responses` is an event
stream). Nothing is retried on another worker: that one would not hold the state; a worker that
cannot be reached is marked failed and the client gets a 502, and the next request goes to the
next healthy worker."""

from __future__ import annotations

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from sglr.http.app import endpoint
from sglr.http.errors import error_response
from sglr.router.proxy import WORKER_HEADER
from sglr.router.state import RouterState

# (path, methods), as the workers serve them (`sglr.server.routes`); `{rest:path}` covers the ids
# and what follows them (`/content`, `/cancel`, `/input_items`).
PINNED_ROUTES = (
    ("/v1/files", ("GET", "POST")),
    ("/v1/files/{rest:path}", ("GET", "DELETE")),
    ("/v1/batches", ("GET", "POST")),
    ("/v1/batches/{rest:path}", ("GET", "POST")),
    ("/v1/responses", ("POST",)),
    ("/v1/responses/{rest:path}", ("GET", "POST", "DELETE")),
)
# Headers the worker needs to read the body (a file upload is multipart).
_FORWARDED_HEADERS = ("authorization", "content-type")


def pinned_routes(state: RouterState) -> list[Route]:
    return [
        Route(path, endpoint(state, _pinned_worker), methods=list(methods)) for path, methods in PINNED_ROUTES
    ]


async def _pinned_worker(state: RouterState, request: Request) -> Response:
    assert state.client is not None
    workers = state.pool.healthy_workers()
    if not workers:
        return error_response(503, "no healthy worker is available")
    worker = workers[0]
    headers = {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers}
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.url.query
    url = worker.url + raw_path.decode("latin-1") + (f"?{query}" if query else "")
    body = await request.body()
    upstream_request = state.client.build_request(request.method, url, content=body or None, headers=headers)
    try:
        upstream = await state.client.send(upstream_request, stream=True)
    except httpx.TransportError as exc:
        state.pool.mark_failed(worker, f"{type(exc).__name__}: {exc}")
        return error_response(
            502, f"the worker that holds this state could not be reached: {type(exc).__name__}"
        )
    return StreamingResponse(
        upstream.aiter_raw(),
        status_code=upstream.status_code,
        headers={WORKER_HEADER: worker.url, **_passed_back(upstream)},
        background=BackgroundTask(upstream.aclose),
    )


def _passed_back(upstream: httpx.Response) -> dict[str, str]:
    """The worker's headers a client reads: the type and, for a file's content, its name."""
    names = ("content-type", "content-disposition", "content-encoding")
    return {name: upstream.headers[name] for name in names if name in upstream.headers}
