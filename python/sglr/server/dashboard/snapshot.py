"""`/dashboard/data`'s JSON: one bounded snapshot of the engine, its prefix cache and the server's
metrics, built when the page polls (and only then: nobody watching costs the engine nothing).

Counters that `/metrics` also serves are read from the same Prometheus objects, so the two agree;
engine state comes from `Engine.get_stats` and `Engine.get_tree_summary` (at most
`TreeSummaryLimits.max_nodes` nodes, each edge's text cut to `MAX_TEXT_CHARS`), so the size is
bounded whatever the tree holds. Blocking (a worker engine answers over IPC): call it in a thread.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits
from sglr.server.dashboard.history import DashboardHistory
from sglr.server.dashboard.latency import histogram_buckets
from sglr.server.dashboard.panels import NUM_WAITING_SHOWN, kv_tier, lora_traffic, waiting_queue

if TYPE_CHECKING:
    from sglr.server.metrics import ServerMetrics
    from sglr.server.state import ServerState

MAX_TEXT_CHARS = 120


def build_snapshot(
    state: ServerState, history: DashboardHistory, limits: TreeSummaryLimits
) -> dict[str, Any]:
    engine, metrics = state.engine, state.metrics
    stats = engine.get_stats()
    bounds: dict[str, tuple[float, ...]] = {}
    buckets: dict[str, tuple[int, ...]] = {}
    if metrics is not None:
        for name, histogram in (("ttft", metrics.ttft), ("itl", metrics.itl), ("e2e", metrics.e2e)):
            bounds[name], buckets[name] = histogram_buckets(histogram)
    history.add(stats, buckets)
    summary = engine.get_tree_summary(limits)
    waiting = engine.get_waiting_queue(NUM_WAITING_SHOWN)
    adapters = state.lora_adapters()
    num_slots, num_free = int(stats["num_kv_slots"]), int(stats["num_free_kv_slots"])
    num_cached = int(stats["num_cached_kv_slots"])
    return {
        "role": "server",
        "model": engine.served_model_name,
        "time": time.time(),
        "uptime_s": stats["uptime_s"],
        "num_samples": len(history),
        "sample_interval_s": history.sample_interval_s,
        "metrics_enabled": metrics is not None,
        "requests": {
            "running": stats["num_running_requests"],
            "waiting": stats["num_waiting_requests"],
            "in_flight_http": len(state.inflight),
            "finished": _finished_by_reason(metrics),
        },
        "tokens": _token_totals(metrics),
        "kv": {
            "num_slots": num_slots,
            "used": num_slots - num_free,
            "cached": num_cached,
            "held_by_requests": num_slots - num_free - num_cached,
            "free": num_free,
            "evicted": stats.get("num_evicted_kv_slots", 0),
            "usage": stats["kv_usage"],
            "hit_rate": stats["cache_hit_rate"],
        },
        "scheduler": {
            "policy": getattr(getattr(engine, "config", None), "schedule_policy", None),
            "retractions": stats["num_retractions"],
            "constraint_cache_hits": stats.get("constraint_cache_hits", 0),
            "jump_forward_tokens": stats["num_jump_forward_tokens"],
            "mean_decode_batch_size": stats["mean_decode_batch_size"],
            "max_decode_batch_size": stats["max_decode_batch_size"],
            "spec_verify_passes": stats["num_verify_passes"],
            "spec_accept_rate": stats["spec_accept_rate"],
            "spec_mean_accepted_length": stats["spec_mean_accepted_length"],
            "lora_adapters": [ref.name for ref in state.lora_adapters()],
        },
        "kv_tier": kv_tier(stats),  # None when the second tier is off
        "lora_traffic": lora_traffic(stats, history, adapters),
        "waiting_queue": waiting_queue(waiting, adapters),
        "series": history.series(bounds),
        "tree": _tree(summary, engine.tokenizer, limits),
    }


def _tree(summary: TreeSummary, tokenizer: Any, limits: TreeSummaryLimits) -> dict[str, Any]:
    nodes = []
    for node in summary.nodes:
        text = tokenizer.decode(list(node.head_token_ids), skip_special_tokens=False)
        truncated = len(text) > MAX_TEXT_CHARS or node.num_tokens > len(node.head_token_ids)
        nodes.append(
            {
                "parent": node.parent,
                "namespace": node.namespace,
                "depth": node.depth,
                "prefix_len": node.prefix_len,
                "num_tokens": node.num_tokens,
                "num_subtree_tokens": node.num_subtree_tokens,
                "num_hits": node.num_hits,
                "lock_ref": node.lock_ref,
                "idle_ticks": node.idle_ticks,
                "text": text[:MAX_TEXT_CHARS],
                "text_truncated": truncated,
            }
        )
    return {
        "num_nodes": summary.num_nodes,
        "num_cached_tokens": summary.num_cached_tokens,
        "max_nodes": limits.max_nodes,
        "max_depth": limits.max_depth,
        "nodes": nodes,
    }


def _counter_samples(counter: Any) -> list[Any]:
    return [s for family in counter.collect() for s in family.samples if s.name.endswith("_total")]


def _finished_by_reason(metrics: ServerMetrics | None) -> dict[str, int]:
    if metrics is None:
        return {}
    out: dict[str, int] = {}
    for sample in _counter_samples(metrics.num_requests):
        reason = sample.labels["finish_reason"]
        out[reason] = out.get(reason, 0) + int(sample.value)
    return out


def _token_totals(metrics: ServerMetrics | None) -> dict[str, int | None]:
    counters = {} if metrics is None else {
        "prompt": metrics.prompt_tokens,
        "generation": metrics.generation_tokens,
        "cached": metrics.cached_tokens,
    }  # fmt: skip
    return {
        key: (sum(int(s.value) for s in _counter_samples(counters[key])) if key in counters else None)
        for key in ("prompt", "generation", "cached")
    }
