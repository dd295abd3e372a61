"""`sglr-router`'s Prometheus metrics (`/metrics`): the router's own and one series per worker.

Counted as requests pass: requests by worker and outcome (`ok`, `error_status`: the worker
answered an error, passed through; `failed`: the worker broke off, the client got an error;
`retried`: the worker broke off before anything reached the client, so another one got the
request; `client_left`: the client closed a stream first), and the time the router spends
choosing a worker. Read from the pool when scraped:
each worker's health, requests in flight and the keys its prefix tree holds.

Counted on the event loop's thread only, so the per-request parts are plain integers and
floats (`_RouteTimes`, the requests counter's children kept by label): a `prometheus_client`
histogram's lock and bucket scan, and a `labels()` lookup, were a visible share of the Python
a routed request runs.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sglr.router.workers import WorkerPool

OUTCOMES = ("ok", "error_status", "failed", "retried", "client_left")
_ROUTE_BUCKETS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)


class RouterMetrics:
    def __init__(self, pool: WorkerPool) -> None:
        from prometheus_client import CollectorRegistry, Counter

        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "sglr_router:requests",
            "Requests by worker and outcome",
            ("worker", "outcome"),
            registry=self.registry,
        )
        self.no_worker = Counter(
            "sglr_router:requests_without_worker",
            "Requests refused because no worker was healthy",
            registry=self.registry,
        )
        self.route_seconds = _RouteTimes()
        self.registry.register(self.route_seconds)
        self.registry.register(_PoolCollector(pool))
        self._request_counters: dict[tuple[str, str], Any] = {}

    def count(self, worker_url: str, outcome: str) -> None:
        counter = self._request_counters.get((worker_url, outcome))
        if counter is None:
            counter = self._request_counters[(worker_url, outcome)] = self.requests.labels(
                worker_url, outcome
            )
        counter.inc()

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _RouteTimes:
    """`sglr_router:route_seconds`, a histogram of the time to choose a worker (routing key +
    policy), as a collector over plain bucket counts."""

    def __init__(self) -> None:
        self._counts = [0] * (len(_ROUTE_BUCKETS) + 1)  # the last: +Inf
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        # Buckets are upper bounds, inclusive: the first bound >= seconds.
        self._counts[bisect_left(_ROUTE_BUCKETS, seconds)] += 1
        self._sum += seconds

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        buckets, total = [], 0
        for bound, count in zip((*_ROUTE_BUCKETS, float("inf")), self._counts, strict=True):
            total += count
            buckets.append((floatToGoString(bound), total))
        yield HistogramMetricFamily(
            "sglr_router:route_seconds",
            "Time to choose a worker (routing key + policy)",
            buckets=buckets,
            sum_value=self._sum,
        )


class _PoolCollector:
    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        healthy = GaugeMetricFamily("sglr_router:worker_healthy", "1 while routable", labels=["worker"])
        in_flight = GaugeMetricFamily(
            "sglr_router:worker_num_in_flight", "Requests in flight", labels=["worker"]
        )
        tree_keys = GaugeMetricFamily(
            "sglr_router:worker_tree_keys", "Keys in the worker's approximate prefix tree", labels=["worker"]
        )
        num_healthy = 0
        for worker in self.pool.workers:
            replica_id = worker.replica_id
            num_healthy += replica_id is not None
            healthy.add_metric([worker.url], float(replica_id is not None))
            in_flight.add_metric([worker.url], float(self.pool.num_in_flight(worker)))
            num_keys = 0 if replica_id is None else _tree_keys(self.pool, replica_id)
            tree_keys.add_metric([worker.url], float(num_keys))
        workers = GaugeMetricFamily("sglr_router:num_healthy_workers", "Routable workers")
        workers.add_metric([], float(num_healthy))
        yield from (healthy, in_flight, tree_keys, workers)


def _tree_keys(pool: WorkerPool, replica_id: int) -> int:
    try:
        return pool.router.num_routed_keys(replica_id)
    except ValueError:  # left the router while scraping
        return 0
