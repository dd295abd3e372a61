"""`--dp-size 2` behind one HTTP front: both replicas serve, streams pass through, and
cache-aware routing concentrates a shared-prefix batch's cache hits compared with round-robin."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_harness import serve

from sglr.data_parallel import DataParallelEngine
from sglr.router.policy import RouterConfig
from sglr.server import build_app
from sse_client import post_stream

NUM_GROUPS = 4
NUM_PER_GROUP = 4


def group_prompt(group: int, index: int) -> str:
    system = f"System prompt number {group}: " + " ".join(f"rule{group}_{n}" for n in range(24))
    return f"{system}\nQuestion {index}?"


def dp_engine(model_dir: Path, policy: str) -> DataParallelEngine:
    return DataParallelEngine(
        str(model_dir),
        dp_size=2,
        router_config=RouterConfig(policy=policy),
        device="cpu",
        max_total_tokens=8192,
        multiprocess=True,
    )


POLICIES = ("cache-aware", "round-robin")


@pytest.fixture(scope="module")
def dp_fronts(tiny_dir: Path) -> Iterator[dict[str, tuple[DataParallelEngine, str]]]:
    """One `--dp-size 2` front per policy: `{policy: (engine, url)}`."""
    with contextlib.ExitStack() as stack:
        fronts = {}
        for policy in POLICIES:
            engine = dp_engine(tiny_dir, policy)
            stack.callback(engine.shutdown)
            fronts[policy] = (engine, stack.enter_context(serve(build_app(engine))))
        yield fronts


def total_cached_tokens(url: str) -> int:
    cached = 0
    with httpx.Client(base_url=url, timeout=120) as client:
        # Group-major order: round-robin then sends each group to both replicas.
        for group in range(NUM_GROUPS):
            for index in range(NUM_PER_GROUP):
                body = {
                    "text": group_prompt(group, index),
                    "sampling_params": {"max_new_tokens": 2, "temperature": 0},
                }
                response = client.post("/generate", json=body)
                assert response.status_code == 200, response.text
                cached += response.json()["meta_info"]["cached_tokens"]
    return cached


@pytest.mark.parametrize("policy", POLICIES)
def test_dp_front_generates_streams_and_uses_both_replicas(dp_fronts, policy: str) -> None:
    engine, url = dp_fronts[policy]
    assert len(engine.worker_pids) == 2  # one worker process per replica (tp 1)
    with httpx.Client(base_url=url, timeout=120) as client:
        assert client.get("/health").status_code == 200
        events = post_stream(
            client,
            "/generate",
            {"text": "Hello there", "sampling_params": {"max_new_tokens": 3}, "stream": True},
        )
        assert events[-1]["meta_info"]["completion_tokens"] == 3
    before = [replica["num_finished"] for replica in engine.get_stats()["replicas"]]
    total_cached_tokens(url)
    stats = engine.get_stats()
    served_counts = [
        replica["num_finished"] - n for replica, n in zip(stats["replicas"], before, strict=True)
    ]
    assert all(count > 0 for count in served_counts), served_counts
    assert stats["dp_size"] == 2 and stats["replica_num_in_flight"] == {0: 0, 1: 0}


def test_cache_aware_concentrates_hits(dp_fronts) -> None:
    """Cache-aware: one miss per group; round-robin: one miss per group on each replica (from
    empty caches, whatever ran on these fronts before)."""
    cached = {}
    for policy, (engine, url) in dp_fronts.items():
        assert engine.flush_cache()
        cached[policy] = total_cached_tokens(url)
    assert cached["cache-aware"] > cached["round-robin"] > 0, cached
