"""`sglr-router`'s health checks: every `health_check_interval_s` each worker's `/health` is
probed; `health_failure_threshold` failures in a row take it out of routing, one success brings
it back. (A request a worker fails takes it out at once: `sglr.router.proxy`.)"""

from __future__ import annotations

import asyncio
import logging

import httpx

from sglr.router.state import RouterState
from sglr.router.workers import Worker

logger = logging.getLogger("sglr.router")


async def probe(state: RouterState, worker: Worker) -> None:
    assert state.client is not None
    settings = state.settings
    try:
        response = await state.client.get(worker.url + "/health", timeout=settings.health_check_timeout_s)
        ok = response.status_code == 200
        reason = f"health check answered {response.status_code}"
    except httpx.HTTPError as exc:
        ok = False
        reason = f"health check failed: {type(exc).__name__}: {exc}"
    was_healthy = worker.healthy
    if ok:
        state.pool.mark_healthy(worker)
        if not was_healthy and worker.healthy:
            logger.info("worker %s is healthy; routing to it", worker.url)
    else:
        state.pool.mark_failed(worker, reason, failure_threshold=settings.health_failure_threshold)
        if was_healthy and not worker.healthy:
            logger.warning("worker %s left routing: %s", worker.url, reason)


async def check_health_forever(state: RouterState) -> None:
    while True:
        await asyncio.sleep(state.settings.health_check_interval_s)
        try:
            await asyncio.gather(*(probe(state, worker) for worker in state.pool.workers))
        except Exception:  # never let one odd answer stop the checks
            logger.exception("health check round failed")
