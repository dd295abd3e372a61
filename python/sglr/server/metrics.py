"""Prometheus metrics (`/metrics`), one registry per app.

Request counters and latency histograms are observed by the server as results stream out of
the engine (`SequenceMetrics`: TTFT and inter-token latency include queueing, prefill and the
HTTP layer's own delay); gauges (running / waiting requests, KV usage, cache hit rate) are read
from the engine when scraped. Names follow SGLang's with an `sglr:` prefix.

A sequence ends with the delta that carries its finish reason or, when the server stops reading
first (the client went away, another sequence of the request failed), when its generation is
closed: it then counts as aborted, with the tokens reported so far (its prompt tokens are known
from the start: the front tokenized them). Either way it is counted once, so
`num_requests_total` agrees with the time-to-first-token and latency series.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sglr.engine.engine import Engine

_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
_ITL_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)  # fmt: skip
_E2E_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)
# What a delta's meta_info reports cumulatively, counted once at a sequence's end.
_COUNT_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens")


class ServerMetrics:
    def __init__(self, engine: Engine, model_name: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        reg = self.registry
        labels = ("model_name",)
        self.num_requests = Counter(
            "sglr:num_requests",
            "Finished requests by finish reason",
            (*labels, "finish_reason"),
            registry=reg,
        )
        self.prompt_tokens = Counter("sglr:prompt_tokens", "Prompt tokens", labels, registry=reg)
        self.generation_tokens = Counter("sglr:generation_tokens", "Generated tokens", labels, registry=reg)
        self.cached_tokens = Counter(
            "sglr:cached_tokens", "Prompt tokens served from the prefix cache", labels, registry=reg
        )
        self.ttft = Histogram(
            "sglr:time_to_first_token_seconds",
            "Time to first token",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=reg,
        )
        self.itl = Histogram(
            "sglr:inter_token_latency_seconds",
            "Time between consecutive output tokens",
            labels,
            buckets=_ITL_BUCKETS,
            registry=reg,
        )
        self.tpot = Histogram(
            "sglr:request_time_per_output_token_seconds",
            "Per request: (e2e latency - time to first token) / (output tokens - 1)",
            labels,
            buckets=_ITL_BUCKETS,
            registry=reg,
        )
        self.e2e = Histogram(
            "sglr:e2e_request_latency_seconds",
            "End-to-end request latency",
            labels,
            buckets=_E2E_BUCKETS,
            registry=reg,
        )
        reg.register(_EngineGauges(engine, model_name))

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _EngineGauges:
    """A custom collector: engine state read at scrape time."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.engine = engine
        self.model_name = model_name

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        stats = self.engine.get_stats()
        values = (
            ("sglr:num_running_reqs", "Requests decoding", stats["num_running_requests"]),
            ("sglr:num_queue_reqs", "Requests waiting to be admitted", stats["num_waiting_requests"]),
            ("sglr:token_usage", "Fraction of KV slots in use (running or cached)", stats["kv_usage"]),
            (
                "sglr:cache_hit_rate",
                "Prompt tokens served from the prefix cache / all",
                stats["cache_hit_rate"],
            ),
            ("sglr:max_total_num_tokens", "KV cache size in tokens", stats["num_kv_slots"]),
            ("sglr:num_cached_tokens", "KV slots held by the prefix cache", stats["num_cached_kv_slots"]),
            ("sglr:gen_throughput", "Generated tokens per busy second", stats["generation_tokens_per_s"]),
            # Speculative decoding (0 while it is off).
            ("sglr:spec_accept_rate", "Accepted / proposed draft tokens", stats.get("spec_accept_rate", 0.0)),
            (
                "sglr:spec_accept_length",
                "Accepted drafts per verify pass",
                stats.get("spec_mean_accepted_length", 0.0),
            ),
            (
                "sglr:spec_verify_passes",
                "Decode passes that verified drafts",
                stats.get("num_verify_passes", 0),
            ),
            ("sglr:num_retractions", "Running requests retracted so far", stats.get("num_retractions", 0)),
            (
                "sglr:num_preemptions",
                "Retractions for a waiting request of higher priority",
                stats.get("num_preemptions", 0),
            ),
            # The second KV tier (0 while it is off): hits from it, bytes moved, load time.
            (
                "sglr:hicache_loaded_tokens",
                "Cached prompt tokens loaded from the KV tier",
                stats.get("hicache_loaded_tokens", 0),
            ),
            (
                "sglr:hicache_loaded_bytes",
                "Bytes loaded from the KV tier",
                stats.get("hicache_loaded_bytes", 0),
            ),
            (
                "sglr:hicache_written_bytes",
                "Bytes written to the KV tier",
                stats.get("hicache_written_bytes", 0),
            ),
            (
                "sglr:hicache_load_seconds",
                "Seconds reading and copying in KV pages",
                stats.get("hicache_load_seconds", 0.0),
            ),
        )
        for name, doc, value in values:
            family = GaugeMetricFamily(name, doc, labels=["model_name"])
            family.add_metric([self.model_name], float(value))
            yield family


class SequenceMetrics:
    """One sequence's share of the metrics: latencies as its tokens arrive, and at its end,
    exactly once, the request counted by finish reason with its token counts and e2e latency."""

    def __init__(self, metrics: ServerMetrics, num_prompt_tokens: int = 0) -> None:
        self.metrics = metrics
        self.start = time.monotonic()
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.ended = False
        self._counts = dict.fromkeys(_COUNT_KEYS, 0)  # cumulative, as the last delta reported
        self._counts["prompt_tokens"] = num_prompt_tokens

    def on_delta(self, delta: dict[str, Any]) -> None:
        if self.ended:
            return
        self._on_tokens(len(delta.get("output_ids", ())))
        meta = delta.get("meta_info", {})
        for key in _COUNT_KEYS:
            if key in meta:
                self._counts[key] = meta[key]
        reason = meta.get("finish_reason")
        if reason is not None:
            self._end(reason.get("type", "unknown"))

    def on_close(self) -> None:
        """The generation was closed: a sequence that had not ended counts as aborted."""
        if not self.ended:
            self._end("abort")

    def _on_tokens(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        now = time.monotonic()
        name = self.metrics.model_name
        if self.last_token_at is None:
            self.first_token_at = self.last_token_at = now
            self.metrics.ttft.labels(name).observe(now - self.start)
            num_tokens -= 1  # the first token has no inter-token gap
        if num_tokens > 0:
            # Tokens that arrive together (jump-forward, or a stream reader that fell behind and
            # got one merged chunk) share the gap, so every token after the first is counted once.
            gap = (now - self.last_token_at) / num_tokens
            itl = self.metrics.itl.labels(name)
            for _ in range(num_tokens):
                itl.observe(gap)
        self.last_token_at = now

    def _end(self, finish_type: str) -> None:
        self.ended = True
        m = self.metrics
        name = m.model_name
        now = time.monotonic()
        m.num_requests.labels(name, finish_type).inc()
        m.prompt_tokens.labels(name).inc(self._counts["prompt_tokens"])
        completion = self._counts["completion_tokens"]
        m.generation_tokens.labels(name).inc(completion)
        m.cached_tokens.labels(name).inc(self._counts["cached_tokens"])
        m.e2e.labels(name).observe(now - self.start)
        if self.first_token_at is not None and completion > 1:
            m.tpot.labels(name).observe((now - self.first_token_at) / (completion - 1))
