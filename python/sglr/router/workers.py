"""`WorkerPool`: the worker servers behind `sglr-router`, by URL, and which of them get requests.

A worker is *routable* while it is healthy; then it holds a replica id in the `Router` (its
load count and prefix tree). A worker that fails a request or its health checks leaves the
`Router` (nothing new goes there; what it had in flight still ends through `finish`), and comes
back under a fresh replica id once healthy again: its cache is presumed gone, so is its tree,
and a late `finish` of a request sent before can never lower the new id's count.

No I/O here: the program above it probes (`sglr.router.health`), forwards (`sglr.router.proxy`)
and reports outcomes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import urlsplit

from sglr.errors import (
    DuplicateWorkerError,
    InvariantError,
    NoReplicaAvailableError,
    RouterConfigError,
    UnknownWorkerError,
)
from sglr.router.policy import Router, RouterConfig


@dataclass
class Worker:
    url: str
    # The id in the Router while routable, else None.
    replica_id: int | None = None
    num_consecutive_failures: int = 0
    # Lifetime counts, for /list_workers and the router's /metrics.
    num_routed: int = 0
    num_failed: int = 0
    last_error: str | None = field(default=None, repr=False)

    @property
    def healthy(self) -> bool:
        return self.replica_id is not None


class Route(NamedTuple):
    """Where one request went: pair with exactly one `WorkerPool.finish(route)`. (A tuple:
    made once per request, it costs a fraction of a frozen dataclass.)"""

    worker: Worker
    replica_id: int


def normalize_url(url: str) -> str:
    """`http(s)://host[:port][/base]` without a trailing slash; anything else (no host, a port
    out of range, spaces or control characters, text that is not Unicode) is refused."""
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and url.isprintable()
        _ = parts.port  # raises ValueError when out of range or not a number
        url.encode("utf-8")  # a lone surrogate is no URL
    except ValueError:  # a bad port; or a lone surrogate (UnicodeEncodeError)
        valid = False
    if not valid or " " in url:
        raise RouterConfigError(f"worker URL {url!r} is not http(s)://host:port")
    return url


class WorkerPool:
    """Thread-safe (the router's event loop and a benchmark's threads may share it)."""

    def __init__(self, urls: Sequence[str] = (), config: RouterConfig | None = None) -> None:
        self.router = Router([], config)
        self._lock = threading.Lock()
        self._workers: dict[str, Worker] = {}
        self._by_replica: dict[int, Worker] = {}
        self._next_replica_id = 0
        for url in urls:
            self.add_worker(url, healthy=True)

    # -- membership ---------------------------------------------------------------------
    def add_worker(self, url: str, *, healthy: bool) -> Worker:
        url = normalize_url(url)
        with self._lock:
            if url in self._workers:
                raise DuplicateWorkerError(f"worker {url} is already routed to")
            worker = self._workers[url] = Worker(url)
            if healthy:
                self._enter(worker)
            return worker

    def remove_worker(self, url: str) -> Worker:
        """The worker gets nothing from now on; requests it has in flight run to their end."""
        url = normalize_url(url)
        with self._lock:
            worker = self._workers.pop(url, None)
            if worker is None:
                raise UnknownWorkerError(f"no worker {url}")
            self._leave(worker)
            return worker

    def get(self, url: str) -> Worker:
        with self._lock:
            worker = self._workers.get(normalize_url(url))
        if worker is None:
            raise UnknownWorkerError(f"no worker {url}")
        return worker

    @property
    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._workers.values())

    def healthy_workers(self) -> list[Worker]:
        return [worker for worker in self.workers if worker.healthy]

    # -- health -------------------------------------------------------------------------
    def mark_healthy(self, worker: Worker) -> None:
        with self._lock:
            worker.num_consecutive_failures = 0
            if self._workers.get(worker.url) is worker and not worker.healthy:
                self._enter(worker)

    def mark_failed(self, worker: Worker, reason: str, *, failure_threshold: int = 1) -> None:
        """One more failure; at `failure_threshold` consecutive ones the worker stops getting
        requests (a failed request counts as reaching the threshold at once)."""
        with self._lock:
            worker.num_consecutive_failures += 1
            worker.last_error = reason
            if worker.num_consecutive_failures >= failure_threshold:
                self._leave(worker)

    # -- routing ------------------------------------------------------------------------
    def route(self, key: Sequence[int] | str) -> Route:
        """Raises `NoReplicaAvailableError` when no worker is healthy."""
        replica_id = self.router.route(key)
        with self._lock:
            worker = self._by_replica.get(replica_id)
        if worker is None:  # left between the two locks: it never got the request
            self.router.finish(replica_id)
            raise NoReplicaAvailableError("the chosen worker left while routing")
        worker.num_routed += 1
        return Route(worker, replica_id)

    def finish(self, route: Route, *, failed: bool = False) -> None:
        if failed:
            route.worker.num_failed += 1
        self.router.finish(route.replica_id)

    def num_in_flight(self, worker: Worker) -> int:
        replica_id = worker.replica_id
        return 0 if replica_id is None else self.router.num_in_flight().get(replica_id, 0)

    def check_invariants(self) -> None:
        self.router.check_invariants()
        with self._lock:
            routable = {w.replica_id: w for w in self._workers.values() if w.replica_id is not None}
            if routable != self._by_replica:
                raise InvariantError("the routable workers differ from the replica-id index")
            if sorted(routable) != self.router.replica_ids:
                raise InvariantError("the router's replicas differ from the healthy workers")

    # -- internals (under self._lock) ---------------------------------------------------
    def _enter(self, worker: Worker) -> None:
        replica_id = self._next_replica_id
        self._next_replica_id += 1
        self.router.add_replica(replica_id)
        worker.replica_id = replica_id
        self._by_replica[replica_id] = worker

    def _leave(self, worker: Worker) -> None:
        if worker.replica_id is None:
            return
        self.router.remove_replica(worker.replica_id)
        del self._by_replica[worker.replica_id]
        worker.replica_id = None
