"""`sglr-router`'s settings and the state its admin app and its fast path share (the worker
pool, the metrics, the connections to the workers while it runs)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from sglr.errors import RouterConfigError
from sglr.limits import MAX_BODY_BYTES
from sglr.router.metrics import RouterMetrics
from sglr.router.proxy import ProxyContext
from sglr.router.workers import WorkerPool


@dataclass(frozen=True)
class RouterSettings:
    health_check_interval_s: float = 2.0
    health_check_timeout_s: float = 2.0
    health_failure_threshold: int = 2
    # Other workers a request may go to after one broke off before replying.
    max_retries: int = 2
    # None: a generation may take as long as it takes.
    request_timeout_s: float | None = None
    connect_timeout_s: float = 5.0
    api_key: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise RouterConfigError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")


@dataclass
class RouterState:
    pool: WorkerPool
    settings: RouterSettings
    metrics: RouterMetrics
    client: httpx.AsyncClient | None = None
    proxy: ProxyContext | None = None
