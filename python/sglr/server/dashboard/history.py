"""`DashboardHistory`: the samples behind the dashboard's time series, taken only when it polls.

A poll adds a sample (engine counters, gauges, the latency histograms' cumulative buckets) when
the last is at least `sample_interval_s` old, so several open pages sample no faster than one;
at most `max_samples` are kept. Rates and hit rates are differences of neighbouring samples,
latency percentiles those of the trailing `latency_window_s`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglr.server.dashboard.latency import Buckets, window_quantile

LATENCY_NAMES = ("ttft", "itl", "e2e")
_QUANTILES = (("p50", 0.5), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class Sample:
    time: float  # monotonic
    wall_time: float
    num_prompt_tokens: int
    num_cached_prompt_tokens: int
    num_generated_tokens: int
    num_running: int
    num_waiting: int
    num_used_slots: int
    num_cached_slots: int
    latency_buckets: dict[str, Buckets]  # by LATENCY_NAMES; empty when metrics are off
    # Ended requests by adapter id: (requests, prompt tokens, generated tokens), cumulative.
    lora_traffic: dict[str, tuple[int, int, int]]

    @classmethod
    def of(cls, stats: dict[str, Any], latency_buckets: dict[str, Buckets], now: float) -> Sample:
        return cls(
            time=now,
            wall_time=time.time(),
            num_prompt_tokens=int(stats["num_prompt_tokens"]),
            num_cached_prompt_tokens=int(stats["num_cached_prompt_tokens"]),
            num_generated_tokens=int(stats["num_generated_tokens"]),
            num_running=int(stats["num_running_requests"]),
            num_waiting=int(stats["num_waiting_requests"]),
            num_used_slots=int(stats["num_kv_slots"]) - int(stats["num_free_kv_slots"]),
            num_cached_slots=int(stats["num_cached_kv_slots"]),
            latency_buckets=latency_buckets,
            lora_traffic={
                lora_id: (c["num_requests"], c["num_prompt_tokens"], c["num_generated_tokens"])
                for lora_id, c in stats.get("lora_traffic", {}).items()
            },
        )


class DashboardHistory:
    """Polled from the event loop and worker threads alike (a lock guards the samples)."""

    def __init__(
        self,
        sample_interval_s: float = 1.0,
        max_samples: int = 600,
        latency_window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sample_interval_s = sample_interval_s
        self.latency_window_s = latency_window_s
        self._clock = clock
        self._samples: deque[Sample] = deque(maxlen=max_samples)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._samples)

    def oldest(self) -> Sample | None:
        with self._lock:
            return self._samples[0] if self._samples else None

    def is_due(self) -> bool:
        with self._lock:
            return not self._samples or self._clock() - self._samples[-1].time >= self.sample_interval_s

    def add(self, stats: dict[str, Any], latency_buckets: dict[str, Buckets]) -> None:
        with self._lock:
            now = self._clock()
            if self._samples and now - self._samples[-1].time < self.sample_interval_s:
                return  # another poll sampled meanwhile
            self._samples.append(Sample.of(stats, latency_buckets, now))

    def series(self, latency_bounds: dict[str, tuple[float, ...]]) -> dict[str, list[float | None]]:
        """One value per sample after the first: the interval that ends at it."""
        with self._lock:
            samples = list(self._samples)
        out: dict[str, list[float | None]] = {
            key: []
            for key in (
                "time",
                "prompt_tokens_per_s",
                "generation_tokens_per_s",
                "hit_rate",
                "running",
                "waiting",
                "kv_used",
                "kv_cached",
            )
        }
        for name in LATENCY_NAMES:
            for label, _ in _QUANTILES:
                out[f"{name}_{label}"] = []
        start = 0  # the newest sample at or before the current one's window starts
        for i in range(1, len(samples)):
            prev, cur = samples[i - 1], samples[i]
            dt = max(cur.time - prev.time, 1e-9)
            num_prompt = cur.num_prompt_tokens - prev.num_prompt_tokens
            num_cached = cur.num_cached_prompt_tokens - prev.num_cached_prompt_tokens
            out["time"].append(cur.wall_time)
            out["prompt_tokens_per_s"].append(num_prompt / dt)
            out["generation_tokens_per_s"].append((cur.num_generated_tokens - prev.num_generated_tokens) / dt)
            out["hit_rate"].append(num_cached / num_prompt if num_prompt > 0 else None)
            out["running"].append(cur.num_running)
            out["waiting"].append(cur.num_waiting)
            out["kv_used"].append(cur.num_used_slots)
            out["kv_cached"].append(cur.num_cached_slots)
            while samples[start + 1].time <= cur.time - self.latency_window_s:
                start += 1
            older = samples[start]  # the window's start, or the first sample when it is younger
            for name in LATENCY_NAMES:
                newer = cur.latency_buckets.get(name)
                bounds = latency_bounds.get(name)
                for label, q in _QUANTILES:
                    value = None
                    if newer is not None and bounds is not None:
                        value = window_quantile(bounds, newer, older.latency_buckets.get(name), q)
                    out[f"{name}_{label}"].append(value)
        return out
