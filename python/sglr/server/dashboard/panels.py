"""The dashboard's engine panels beyond the pool and the tree: the second KV tier and traffic by
LoRA adapter (from one `Engine.get_stats` read), the head of the waiting queue (docs/dashboard.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sglr.engine.scheduler.waiting_queue import WaitingRequest
from sglr.server.dashboard.history import DashboardHistory

MAX_ADAPTER_ROWS = 32  # adapters come and go at runtime: the busiest are shown
BASE_NAME = "base"
NUM_WAITING_SHOWN = 20
_TIER_KEYS = (
    "stored_pages",
    "stored_bytes",
    "written_pages",
    "written_bytes",
    "loaded_tokens",
    "loaded_bytes",
    "load_seconds",
    "wait_seconds",
    "corrupt_pages",
    "evicted_pages",
)


def kv_tier(stats: dict[str, Any]) -> dict[str, Any] | None:
    """The `hicache_*` counters without their prefix; None when the tier is off (the pool then
    reports none of them)."""
    if "hicache_stored_pages" not in stats:
        return None
    return {key: stats[f"hicache_{key}"] for key in _TIER_KEYS}


def lora_traffic(
    stats: dict[str, Any], history: DashboardHistory, adapters: Iterable[Any]
) -> list[dict[str, Any]]:
    """Ended requests and their tokens by adapter, since start and over the sampled history (the
    oldest kept sample to now), busiest first. An adapter unloaded since shows its id."""
    names = _adapter_names(adapters)
    oldest = history.oldest()
    before = oldest.lora_traffic if oldest is not None else {}
    rows = []
    for lora_id, counts in stats.get("lora_traffic", {}).items():
        num_requests, num_prompt, num_generated = (
            counts["num_requests"], counts["num_prompt_tokens"], counts["num_generated_tokens"],
        )  # fmt: skip
        old_requests, old_prompt, old_generated = before.get(lora_id, (0, 0, 0))
        rows.append(
            {
                "name": names.get(lora_id) or _unloaded(lora_id),
                "lora_id": int(lora_id),
                "num_requests": num_requests,
                "num_prompt_tokens": num_prompt,
                "num_generated_tokens": num_generated,
                "window_requests": num_requests - old_requests,
                "window_tokens": num_prompt + num_generated - old_prompt - old_generated,
            }
        )
    rows.sort(key=lambda row: (-row["num_requests"], row["lora_id"]))
    return rows[:MAX_ADAPTER_ROWS]


def waiting_queue(rows: list[WaitingRequest], adapters: Iterable[Any]) -> list[dict[str, Any]]:
    """The head of the queue, in the order the next step offers it to admission."""
    names = _adapter_names(adapters)
    return [
        {
            "rid": row.rid,
            "priority": row.priority,
            "prompt_len": row.prompt_len,
            "matched_prefix_len": row.matched_prefix_len,
            "waiting_s": row.waiting_s,
            "is_urgent": row.is_urgent,
            "adapter": names.get(str(row.lora_id)) or _unloaded(str(row.lora_id)),
        }
        for row in rows[:NUM_WAITING_SHOWN]
    ]


def _adapter_names(adapters: Iterable[Any]) -> dict[str, str]:
    return {str(ref.lora_id): ref.name for ref in adapters} | {"0": BASE_NAME}


def _unloaded(lora_id: str) -> str:
    return f"#{lora_id} (unloaded)"
