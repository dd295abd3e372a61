"""Latency percentiles over a time window, from the cumulative buckets of the server's Prometheus
histograms (`server/metrics.py`): the difference of two snapshots is the window's histogram, and
its quantiles interpolate within a bucket as Prometheus's `histogram_quantile` does."""

from __future__ import annotations

import math
from typing import Any

Buckets = tuple[int, ...]  # cumulative counts, one per upper bound (the last is +Inf)


def histogram_buckets(histogram: Any) -> tuple[tuple[float, ...], Buckets]:
    """`(upper bounds, cumulative counts)` of a `prometheus_client.Histogram`, all its labels
    summed (the server labels by model name only, one value)."""
    counts: dict[float, int] = {}
    for family in histogram.collect():
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                counts[bound] = counts.get(bound, 0) + int(sample.value)
    bounds = tuple(sorted(counts))
    return bounds, tuple(counts[b] for b in bounds)


def window_quantile(
    bounds: tuple[float, ...], newer: Buckets, older: Buckets | None, q: float
) -> float | None:
    """The `q` quantile of what was observed between the `older` and `newer` snapshots (None
    when nothing was); a rank in the +Inf bucket answers the largest finite bound. An `older`
    snapshot without buckets (taken before the first observation: no labelled series yet)
    counts as zeros."""
    if older is not None and len(older) != len(newer):
        older = None
    counts = [n - (older[i] if older is not None else 0) for i, n in enumerate(newer)]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    lower_bound, lower_count = 0.0, 0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound
