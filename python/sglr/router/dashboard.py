"""`sglr-router`'s dashboard: the same page as `sglr-server`'s (`sglr/http/dashboard/`), its data
the router's view of each worker:

    GET /dashboard, /dashboard/dashboard.js   the page and its script (public: no data)
    GET /dashboard/data                       {"role": "router", "workers": [...], ...} (the key)

Per worker: health, load (requests in flight through this router), the size of the router's
approximate prefix tree for it, the requests it was sent, and, read from the worker's own public
`/metrics` when polled (null when it serves none), its prefix-cache hit rate and its share of all
workers' cached prompt tokens.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import Response

from sglr.http.dashboard import asset_response
from sglr.http.jsonout import JSONOut
from sglr.router.state import RouterState
from sglr.router.workers import Worker

_METRICS_TIMEOUT_S = 1.0


async def dashboard_page(state: RouterState, request: Request) -> Response:
    return asset_response("dashboard.html")


async def dashboard_script(state: RouterState, request: Request) -> Response:
    return asset_response("dashboard.js")


async def dashboard_data(state: RouterState, request: Request) -> Response:
    pool = state.pool
    workers = pool.workers
    cache = await asyncio.gather(*(_worker_cache(state, worker) for worker in workers))
    total_cached = sum(c["cached_tokens"] or 0 for c in cache)
    total_routed = sum(w.num_routed for w in workers)
    rows = []
    for worker, worker_cache in zip(workers, cache, strict=True):
        cached = worker_cache["cached_tokens"]
        rows.append(
            {
                "url": worker.url,
                "healthy": worker.healthy,
                "load": pool.num_in_flight(worker),
                "tree_tokens": _tree_keys(state, worker),
                "num_requests": worker.num_routed,
                "num_failed": worker.num_failed,
                "request_share": worker.num_routed / total_routed if total_routed else None,
                "hit_rate": worker_cache["hit_rate"],
                "hit_share": cached / total_cached if cached is not None and total_cached else None,
            }
        )
    return JSONOut({"role": "router", "model": None, "time": time.time(), "num_samples": 0, "workers": rows})


def _tree_keys(state: RouterState, worker: Worker) -> int:
    if worker.replica_id is None:
        return 0
    try:
        return state.pool.router.num_routed_keys(worker.replica_id)
    except ValueError:  # it left the router meanwhile
        return 0


async def _worker_cache(state: RouterState, worker: Worker) -> dict[str, float | None]:
    """The worker's hit rate and cached prompt tokens from its `/metrics` (None when unread)."""
    values: dict[str, float | None] = {"hit_rate": None, "cached_tokens": None}
    if state.client is None or not worker.healthy:
        return values
    try:
        response = await state.client.get(f"{worker.url}/metrics", timeout=_METRICS_TIMEOUT_S)
    except httpx.HTTPError:
        return values
    if response.status_code != 200:
        return values
    return _cache_values(response.text, values)


def _cache_values(text: str, values: dict[str, Any]) -> dict[str, Any]:
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "sglr:cache_hit_rate":
                    values["hit_rate"] = sample.value
                elif sample.name == "sglr:cached_tokens_total":
                    values["cached_tokens"] = (values["cached_tokens"] or 0) + sample.value
    except (ValueError, IndexError, KeyError, TypeError):  # not Prometheus text: keep what was read
        pass
    return values
