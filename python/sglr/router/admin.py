"""`build_router_app(pool)`: the Starlette application of `sglr-router`'s admin routes.

Generation (`keys.GENERATION_PATHS`: `/generate`, `/v1/completions`, `/v1/chat/completions`)
does not pass through here: `sglr.router.server` sends it straight to the worker the policy
picks (`sglr.router.proxy`) and hands every other request to this app. Model and server info,
`/tokenize`, `/detokenize`, `/encode` and `/v1/embeddings`, go to any healthy worker
(rotating); `/flush_cache` and `/abort_request` go to every healthy one (answering
the worst status), and so do `/load_lora_adapter` and `/unload_lora_adapter` (every worker
serves the same adapters; the answer is the first worker's, or the first error in worker order,
with each worker's status under `workers`). `/v1/files*`, `/v1/batches*` and `/v1/responses*`
go to one fixed worker, which holds their stored state (`sglr.router.pinned`).
Run-time membership: `POST /add_worker?url=...` / `POST /remove_worker?url=...` (or
`{"url": ...}` as the body), `GET /list_workers`; a new worker is routable once it answers a
health check (`sglr.router.health`). `/health` is 200 while some worker is healthy; `/metrics`
is the router's (`sglr.router.metrics`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sglr.errors import InvalidRequestError, RouterConfigError
from sglr.http.app import endpoint, json_app
from sglr.http.errors import error_body, error_response
from sglr.http.jsonout import JSONOut
from sglr.router.dashboard import dashboard_data, dashboard_page, dashboard_script
from sglr.router.health import probe
from sglr.router.metrics import RouterMetrics
from sglr.router.pinned import pinned_routes
from sglr.router.proxy import WORKER_HEADER
from sglr.router.state import RouterSettings, RouterState
from sglr.router.workers import Worker, WorkerPool, normalize_url

# Answered by any one worker: every worker serves the same model.
ANY_WORKER_GET_PATHS = (
    "/health_generate",
    "/v1/models",
    "/model_info",
    "/get_model_info",
    "/server_info",
    "/get_server_info",
)
# Answered by any one worker too: they share the tokenizer (and the weights, for embeddings).
ANY_WORKER_POST_PATHS = (
    "/tokenize",
    "/v1/tokenize",
    "/detokenize",
    "/v1/detokenize",
    "/encode",
    "/v1/embeddings",
)
EVERY_WORKER_POST_PATHS = ("/flush_cache", "/abort_request")
LORA_ADMIN_PATHS = ("/load_lora_adapter", "/unload_lora_adapter")
# One worker's answer to a broadcast: its url, status, error object (None: success) and body.
_Answer = tuple[str, int, Any, Any]


def build_router_app(pool: WorkerPool, settings: RouterSettings | None = None) -> Starlette:
    settings = settings or RouterSettings()
    state = RouterState(pool=pool, settings=settings, metrics=RouterMetrics(pool))

    routes = [Route(path, endpoint(state, _any_worker), methods=["GET"]) for path in ANY_WORKER_GET_PATHS]
    routes.append(Route("/v1/models/{model:path}", endpoint(state, _any_worker), methods=["GET"]))
    routes += [Route(path, endpoint(state, _any_worker), methods=["POST"]) for path in ANY_WORKER_POST_PATHS]
    routes += [Route(path, endpoint(state, _every_worker), methods=["GET", "POST"]) for path in EVERY_WORKER_POST_PATHS]  # fmt: skip
    routes += [
        Route(path, endpoint(state, _every_worker_lora), methods=["POST"]) for path in LORA_ADMIN_PATHS
    ]
    routes += pinned_routes(state)
    routes += [
        Route("/health", endpoint(state, _health), methods=["GET"]),
        Route("/add_worker", endpoint(state, _add_worker), methods=["POST"]),
        Route("/remove_worker", endpoint(state, _remove_worker), methods=["POST"]),
        Route("/list_workers", endpoint(state, _list_workers), methods=["GET"]),
        Route("/metrics", endpoint(state, _metrics), methods=["GET"]),
        Route("/dashboard", endpoint(state, dashboard_page), methods=["GET"]),  # router/dashboard.py
        Route("/dashboard/dashboard.js", endpoint(state, dashboard_script), methods=["GET"]),
        Route("/dashboard/data", endpoint(state, dashboard_data), methods=["GET"]),
    ]
    app = json_app(routes, settings.api_key, settings.max_body_bytes)
    app.state.sglr_router = state
    return app


_rotation = itertools.count()


async def _any_worker(state: RouterState, request: Request) -> Response:
    assert state.client is not None
    workers = state.pool.healthy_workers()
    if workers:
        start = next(_rotation) % len(workers)
        workers = workers[start:] + workers[:start]
    # Read once: a worker that fails is retried on the next with the same body.
    body = await request.body() if request.method == "POST" else None
    headers = _auth(request)
    if body is not None:
        headers["content-type"] = request.headers.get("content-type", "application/json")
    for worker in workers:
        try:
            url = worker.url + _path_and_query(request)
            upstream = await state.client.request(request.method, url, content=body, headers=headers)
        except httpx.TransportError as exc:
            state.pool.mark_failed(worker, f"{type(exc).__name__}: {exc}")
            continue
        return Response(
            upstream.content,
            status_code=upstream.status_code,
            headers={WORKER_HEADER: worker.url},
            media_type=upstream.headers.get("content-type"),
        )
    return error_response(503, "no healthy worker is available")


async def _broadcast(state: RouterState, request: Request) -> list[_Answer] | None:
    """The request sent to every healthy worker at once; their answers in worker order (None:
    no worker is healthy)."""
    assert state.client is not None
    client = state.client
    body = await request.body()
    workers = state.pool.healthy_workers()
    if not workers:
        return None
    headers = {**_auth(request), "content-type": request.headers.get("content-type", "application/json")}

    async def one(worker: Worker) -> _Answer:
        try:
            upstream = await client.request(request.method, worker.url + _path_and_query(request), content=body, headers=headers)  # fmt: skip
        except httpx.TransportError as exc:
            state.pool.mark_failed(worker, f"{type(exc).__name__}: {exc}")
            message = f"worker {worker.url} did not answer: {type(exc).__name__}"
            return worker.url, 502, error_body(502, message)["error"], None
        return worker.url, upstream.status_code, _error_of(upstream), _json_of(upstream)

    return list(await asyncio.gather(*(one(worker) for worker in workers)))


async def _every_worker(state: RouterState, request: Request) -> Response:
    answers = await _broadcast(state, request)
    if answers is None:
        return error_response(503, "no healthy worker is available")
    statuses = {url: code for url, code, _, _ in answers}
    if all(code == 200 for code in statuses.values()):
        return JSONOut({"workers": statuses})
    # The worst answer's status, and its error (the field a bad request got wrong, say).
    _, status, error, _ = max(answers, key=lambda answer: answer[1])
    payload: dict[str, Any] = {"workers": statuses}
    if error is not None:
        payload["error"] = error
    return JSONOut(payload, status_code=status)


async def _every_worker_lora(state: RouterState, request: Request) -> Response:
    """A load or unload on every worker: the first worker's answer (its adapters), or the first
    error in worker order. No undoing: a load one worker refused stays on those that took it,
    which `workers` names (unload it there, or through the router, to start over)."""
    answers = await _broadcast(state, request)
    if answers is None:
        return error_response(503, "no healthy worker is available")
    statuses = {url: code for url, code, _, _ in answers}
    failed = [answer for answer in answers if answer[1] != 200]
    if not failed:
        first = answers[0][3]
        return JSONOut({**(first if isinstance(first, dict) else {}), "workers": statuses})
    _, status, error, _ = failed[0]
    payload: dict[str, Any] = {"workers": statuses}
    if error is not None:
        payload["error"] = error
    return JSONOut(payload, status_code=status)


def _json_of(upstream: httpx.Response) -> Any:
    try:
        return upstream.json()
    except ValueError:
        return None


def _error_of(upstream: httpx.Response) -> Any:
    """The error object of a worker's error answer (None: success, or not sglr's JSON shape)."""
    if upstream.status_code < 400:
        return None
    try:
        error = upstream.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error if isinstance(error, dict) else None


async def _health(state: RouterState, request: Request) -> Response:
    num_healthy = len(state.pool.healthy_workers())
    if num_healthy == 0:
        return error_response(503, "no healthy worker")
    return JSONOut({"num_healthy_workers": num_healthy})


async def _worker_url(request: Request) -> str:
    """The worker URL of a membership request, normalized; a 400 naming `url` otherwise."""
    url = request.query_params.get("url")
    if url is None:
        try:
            body = json.loads(await request.body() or b"{}")
        except (ValueError, RecursionError):
            body = None
        url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str) or not url:
        raise InvalidRequestError(
            'give the worker as ?url=http://host:port or a JSON body {"url": ...}', "url"
        )
    try:
        return normalize_url(url)
    except RouterConfigError as exc:
        raise InvalidRequestError(str(exc), "url") from exc


async def _add_worker(state: RouterState, request: Request) -> Response:
    worker = state.pool.add_worker(await _worker_url(request), healthy=False)
    # Routable as soon as it answers a health check: now if it is up, else from the checker.
    await probe(state, worker)
    return JSONOut(_describe_worker(state, worker))


async def _remove_worker(state: RouterState, request: Request) -> Response:
    worker = state.pool.remove_worker(await _worker_url(request))
    if state.proxy is not None:
        state.proxy.upstreams.discard(worker.url)
    return JSONOut(_describe_worker(state, worker))


async def _list_workers(state: RouterState, request: Request) -> Response:
    return JSONOut({"workers": [_describe_worker(state, worker) for worker in state.pool.workers]})


async def _metrics(state: RouterState, request: Request) -> Response:
    body, content_type = state.metrics.render()
    return Response(body, media_type=content_type)


def _describe_worker(state: RouterState, worker: Worker) -> dict:
    return {
        "url": worker.url,
        "healthy": worker.healthy,
        "num_in_flight": state.pool.num_in_flight(worker),
        "num_routed": worker.num_routed,
        "num_failed": worker.num_failed,
        "last_error": worker.last_error,
    }


def _path_and_query(request: Request) -> str:
    """As the client sent them: the path still percent-encoded (decoded, `%ff%00` is no URL)."""
    path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.url.query
    return path.decode("latin-1") + (f"?{query}" if query else "")


def _auth(request: Request) -> dict[str, str]:
    value = request.headers.get("authorization")
    return {"authorization": value} if value else {}
