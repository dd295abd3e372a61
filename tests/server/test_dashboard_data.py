"""The dashboard's data without a server: latency quantiles from histogram buckets, samples taken
only as often as the interval allows, the query's tree limits, the tree summary binding, and the
snapshot of an in-process engine (second KV tier on, one LoRA adapter, one request at a time)
after a small load: its tier and adapter panels equal the engine's stats, and its waiting queue
lists the requests queued behind a long one, in admission order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sglr._core import RadixTree
from sglr.engine.kv.tree_summary import MAX_SUMMARY_NODES, TreeSummaryLimits, merge_summaries, summarize_tree
from sglr.errors import InvalidRequestError
from sglr.server.dashboard.history import DashboardHistory
from sglr.server.dashboard.latency import histogram_buckets, window_quantile
from sglr.server.dashboard.routes import tree_limits
from sglr.server.dashboard.snapshot import build_snapshot

BOUNDS = (0.1, 0.2, 0.4, float("inf"))


def test_window_quantiles_interpolate_within_the_window_buckets() -> None:
    older = (5, 5, 5, 5)  # five fast observations before the window
    newer = (5, 7, 9, 9)  # in the window: two in (0.1, 0.2], two in (0.2, 0.4]
    assert window_quantile(BOUNDS, newer, older, 0.5) == pytest.approx(0.2)
    assert window_quantile(BOUNDS, newer, older, 0.75) == pytest.approx(0.3)
    assert window_quantile(BOUNDS, newer, None, 0.5) == pytest.approx(0.1 * 4.5 / 5)
    assert window_quantile(BOUNDS, older, older, 0.5) is None  # nothing observed in the window
    assert window_quantile(BOUNDS, (0, 0, 0, 3), None, 0.99) == 0.4  # only +Inf: the largest bound
    # Sampled before the first observation, a histogram has no series yet: its buckets are empty.
    assert window_quantile(BOUNDS, newer, (), 0.5) == window_quantile(BOUNDS, newer, None, 0.5)
    assert window_quantile((), (), None, 0.5) is None


def test_histogram_buckets_read_a_prometheus_histogram() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    histogram = Histogram("h", "h", ("model_name",), buckets=BOUNDS[:-1], registry=CollectorRegistry())
    for value in (0.05, 0.15, 0.3, 7.0):
        histogram.labels("m").observe(value)
    assert histogram_buckets(histogram) == (BOUNDS, (1, 2, 3, 4))


def _stats(prompt: int, cached: int, generated: int) -> dict[str, int]:
    return {
        "num_prompt_tokens": prompt,
        "num_cached_prompt_tokens": cached,
        "num_generated_tokens": generated,
        "num_running_requests": 1,
        "num_waiting_requests": 0,
        "num_kv_slots": 100,
        "num_free_kv_slots": 60,
        "num_cached_kv_slots": 30,
    }


def test_history_samples_at_most_once_per_interval_and_derives_rates() -> None:
    now = [0.0]
    history = DashboardHistory(
        sample_interval_s=1.0, max_samples=3, latency_window_s=10.0, clock=lambda: now[0]
    )
    history.add(_stats(0, 0, 0), {"ttft": (0, 0, 0, 0)})
    now[0] = 0.5
    history.add(_stats(999, 999, 999), {})  # too soon: dropped
    assert len(history) == 1 and not history.is_due()
    now[0] = 2.0
    history.add(_stats(100, 40, 20), {"ttft": (1, 2, 2, 2)})
    series = history.series({"ttft": BOUNDS})
    assert series["prompt_tokens_per_s"] == [50.0]
    assert series["generation_tokens_per_s"] == [10.0]
    assert series["hit_rate"] == [0.4]
    assert series["kv_used"] == [40] and series["kv_cached"] == [30]
    assert series["ttft_p50"] == [pytest.approx(0.1)]
    assert series["itl_p50"] == [None]  # not observed at all
    for t in (3.0, 4.0, 5.0):
        now[0] = t
        history.add(_stats(100, 40, 20), {})
    assert len(history) == 3  # bounded
    assert history.series({})["hit_rate"] == [None, None]  # no prompt tokens in those intervals


@pytest.mark.parametrize(
    ("params", "field"),
    [({"max_nodes": "x"}, "max_nodes"), ({"max_depth": "-1"}, "max_depth"),
     ({"max_nodes": str(MAX_SUMMARY_NODES + 1)}, "max_nodes"), ({"nodes": "3"}, "nodes")],
)  # fmt: skip
def test_bad_tree_limits_name_their_field(params: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        tree_limits(params)
    assert raised.value.param == field


def test_tree_limits_default_and_parse() -> None:
    assert tree_limits({}) == TreeSummaryLimits()
    assert tree_limits({"max_nodes": "5", "max_depth": "2"}) == TreeSummaryLimits(max_nodes=5, max_depth=2)


def test_the_summary_binding_reports_a_shared_prefix_and_its_hits() -> None:
    tree = RadixTree()
    system = list(range(100, 140))
    for i, tail in enumerate(([1, 2], [3, 4], [5, 6])):
        tokens = np.array(system + tail, dtype=np.int32)
        slots = np.arange(1000 * i, 1000 * i + tokens.size, dtype=np.int32)
        _, node = tree.insert_with_node(tokens, slots, "ns")
        tree.lock(node)
        tree.unlock(node)
    summary = summarize_tree(tree, TreeSummaryLimits(max_nodes=2, max_head_tokens=3))
    assert (summary.num_nodes, summary.num_cached_tokens) == (4, 46)
    top, leaf = summary.nodes
    assert (top.parent, top.namespace, top.num_tokens, top.num_hits, top.head_token_ids) == (
        -1, "ns", 40, 3, (100, 101, 102),
    )  # fmt: skip
    assert (leaf.parent, leaf.prefix_len, leaf.num_hits) == (0, 42, 1)
    tree.check_invariants()


def test_replica_summaries_merge_with_their_parents_shifted() -> None:
    trees = []
    for first in (1, 50):
        tree = RadixTree()
        tree.insert(np.arange(first, first + 4, dtype=np.int32), np.arange(4, dtype=np.int32))
        tree.insert(np.arange(first, first + 6, dtype=np.int32), np.arange(10, 16, dtype=np.int32))
        trees.append(summarize_tree(tree, TreeSummaryLimits()))
    merged = merge_summaries(trees)
    assert (merged.num_nodes, merged.num_cached_tokens) == (4, 12)
    assert [node.parent for node in merged.nodes] == [-1, 0, -1, 2]
    assert merged.nodes[2].head_token_ids[0] == 50


PAGE = 16
GREEDY = {"max_new_tokens": 3, "temperature": 0.0}


@pytest.fixture(scope="module")
def loaded_state(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """An engine with the second KV tier and one adapter, after two base requests and one on the
    adapter (64-token prompts: four whole pages each)."""
    from sglr.engine.engine import Engine
    from sglr.server import ServerSettings
    from sglr.server.state import ServerState
    from sglr.testing.tiny_lora import write_peft_adapter

    adapter = write_peft_adapter(tiny_dir, tmp_path_factory.mktemp("dashboard-lora") / "sql", rank=4, seed=3)
    engine = Engine(
        model_path=str(tiny_dir),
        device="cpu",
        debug_invariants=True,
        max_total_tokens=512,
        enable_hierarchical_cache=True,
        hicache_page_size=PAGE,
        lora_paths=[f"sql={adapter}"],
        max_running_requests=1,  # the waiting-queue test queues requests behind a long one
    )
    try:
        state = ServerState(engine, ServerSettings(), None)
        build_snapshot(state, state.dashboard, TreeSummaryLimits())  # the history's first sample
        for seed, lora_path in ((0, None), (1, None), (2, "sql")):
            prompt = np.random.default_rng(seed).integers(5, 200, 4 * PAGE).tolist()
            engine.generate(input_ids=prompt, sampling_params=GREEDY, lora_path=lora_path)
        yield state
    finally:
        engine.shutdown()


def test_the_snapshot_shows_the_kv_tier_and_traffic_by_adapter(loaded_state) -> None:
    state = loaded_state
    snapshot = build_snapshot(state, state.dashboard, TreeSummaryLimits(max_nodes=4))
    stats = state.engine.get_stats()
    tier = snapshot["kv_tier"]
    assert tier == {key: stats[f"hicache_{key}"] for key in tier}
    assert tier["stored_pages"] > 0 and tier["stored_bytes"] > 0 and tier["corrupt_pages"] == 0
    rows = {row["name"]: row for row in snapshot["lora_traffic"]}
    assert set(rows) == {"base", "sql"}
    assert (rows["base"]["num_requests"], rows["sql"]["num_requests"]) == (2, 1)
    for row in rows.values():
        counts = stats["lora_traffic"][str(row["lora_id"])]
        assert row["num_prompt_tokens"] == counts["num_prompt_tokens"] == row["num_requests"] * 4 * PAGE
        assert row["num_generated_tokens"] == counts["num_generated_tokens"] == row["num_requests"] * 3
    # All of it came after the history's first sample (taken before the load).
    assert rows["sql"]["window_requests"] == 1 and rows["sql"]["window_tokens"] == 4 * PAGE + 3


def test_the_snapshot_lists_the_waiting_queue_in_admission_order(loaded_state) -> None:
    state = loaded_state
    engine = state.engine
    long = {"max_new_tokens": 400, "temperature": 0.0, "ignore_eos": True}
    prompts = {f"wait-{i}": np.random.default_rng(10 + i).integers(5, 200, 20 + i).tolist() for i in range(3)}
    threads, deadline = [], time.monotonic() + 60
    for rid, prompt in prompts.items():  # one after another: wait-0 runs, the others queue
        thread = threading.Thread(
            target=engine.generate, kwargs={"input_ids": prompt, "sampling_params": long, "rid": rid}
        )
        thread.start()
        threads.append(thread)
        while rid not in {row.rid for row in engine.get_waiting_queue()} and rid != "wait-0":
            assert time.monotonic() < deadline, f"{rid} never queued"
            time.sleep(0.01)  # queued before the next is sent, so arrival order is known
    try:
        snapshot = build_snapshot(state, state.dashboard, TreeSummaryLimits(max_nodes=1))
    finally:
        for rid in prompts:
            engine.abort(rid)
        for thread in threads:
            thread.join(timeout=60)
    rows = snapshot["waiting_queue"]
    assert [row["rid"] for row in rows] == ["wait-1", "wait-2"]  # lpm, no prefix cached: arrival order
    for row in rows:
        assert row["prompt_len"] == len(prompts[row["rid"]])
        assert (row["priority"], row["adapter"], row["is_urgent"]) == (None, "base", False)
        assert row["matched_prefix_len"] == 0 and row["waiting_s"] > 0
    assert snapshot["requests"]["waiting"] == 2
