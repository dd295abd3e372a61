"""The `sglr._core.Scheduler` binding surface: types, the engine's calling pattern, errors,
knobs and GIL release."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from sglr import errors
from sglr._core import Admission, Decision, RadixTree, Scheduler
from sglr.engine.kv import KVPool, RequestKV


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def cached_tree(tokens: np.ndarray, first_slot: int = 100) -> RadixTree:
    tree = RadixTree()
    tree.insert(tokens, np.arange(first_slot, first_slot + tokens.size, dtype=np.int32))
    return tree


def test_select_returns_typed_decision_and_locks_the_prefix() -> None:
    tree = cached_tree(ids(1, 2, 3, 4, 5, 6))
    sched = Scheduler("lpm")
    sched.add_request(7, ids(9, 9, 9), max_new_tokens=4)
    sched.add_request(8, ids(1, 2, 3, 4, 50), max_new_tokens=4)
    assert len(sched) == 2 and 8 in sched and 99 not in sched

    decision = sched.select(tree, num_free_slots=100)
    assert isinstance(decision, Decision) and len(decision) == 2
    first, second = decision.admitted
    assert isinstance(first, Admission)
    assert (first.rid, first.prefix_len, first.extend_len) == (8, 4, 1)
    assert first.is_prompt_done and not first.is_continuation
    assert (second.rid, second.prefix_len, second.extend_len) == (7, 0, 3)
    assert decision.prefix_slots.dtype == np.int32 and decision.prefix_offsets.dtype == np.int64
    assert decision.prefix_offsets.tolist() == [0, 4, 4]
    assert decision.prefix_slots_of(0).tolist() == [100, 101, 102, 103]
    assert decision.prefix_slots_of(-1).size == 0
    assert decision.num_tokens_to_evict == 0
    assert decision.num_prefill_tokens == 4 and decision.stop_reason == "queue_exhausted"
    assert [a.rid for a in decision] == [8, 7]
    assert "num_admitted=2" in repr(decision) and "rid=8" in repr(first)
    # The engine now owns the lock on the matched prefix.
    assert isinstance(first.node, int) and tree.lock_ref(first.node) == 1
    assert tree.protected_size() == 4
    assert len(sched) == 0 and sched.step == 1
    with pytest.raises(IndexError):
        decision.prefix_slots_of(2)
    sched.check_invariants()


def test_engine_loop_keeps_slot_accounting_exact() -> None:
    """The engine's calling pattern: the KV pool takes the admitted locks, evicts what the
    decision reports, allocates the prefill, shares each chunk (moving the lock) and releases
    finished requests. free + cached + held == total every step."""
    pool = KVPool(300, max_num_reqs=8)
    sched = Scheduler("lpm", max_prefill_tokens=96, max_running_requests=4)
    rng = np.random.default_rng(0)
    system = rng.integers(0, 1000, size=60, dtype=np.int32)
    prompts = {}
    for rid in range(24):
        tail = rng.integers(1000, 2000, size=int(rng.integers(5, 120)), dtype=np.int32)
        prompts[rid] = np.concatenate([system if rid % 3 else system[:20], tail])
        sched.add_request(rid, prompts[rid], max_new_tokens=0)
    held: dict[int, RequestKV] = {}  # chunked requests
    num_hits = 0
    while len(sched):
        decision = sched.select(pool.tree, pool.num_free_slots)
        assert decision.num_tokens_to_evict == max(0, decision.num_prefill_tokens - pool.num_free_slots)
        assert pool.can_reserve(decision.num_prefill_tokens)
        for i, admission in enumerate(decision.admitted):
            tokens = prompts[admission.rid]
            if admission.is_continuation:
                kv = held.pop(admission.rid)
            else:
                kv = RequestKV()
                assert pool.admit(kv, decision.prefix_slots_of(i), admission.node)
                num_hits += admission.prefix_len
            assert pool.reserve([kv], [admission.extend_len])
            pool.commit(kv)
            end = admission.prefix_len + admission.extend_len
            pool.share(kv, tokens[:end], None)
            if admission.is_prompt_done:
                pool.release(kv, tokens[:end], None, keep=True)  # finishes at once (no decode here)
            else:
                held[admission.rid] = kv
        pool.check_invariants()
        sched.check_invariants()
    assert not held and pool.tree.protected_size() == 0
    assert num_hits > 0


def test_chunked_prefill_is_continued_first() -> None:
    tree = RadixTree()
    sched = Scheduler("fcfs", max_prefill_tokens=8)
    sched.add_request(1, np.arange(1, 13, dtype=np.int32), max_new_tokens=2)
    sched.add_request(2, ids(50, 51), max_new_tokens=2)
    first = sched.select(tree, 100)
    assert [(a.rid, a.prefix_len, a.extend_len, a.is_prompt_done) for a in first] == [(1, 0, 8, False)]
    assert first.stop_reason == "prefill_budget" and sched.chunked_rid == 1
    second = sched.select(tree, 100)
    cont = second.admitted[0]
    assert (cont.rid, cont.prefix_len, cont.extend_len) == (1, 8, 4)
    assert cont.is_continuation and cont.is_prompt_done and cont.node is None
    assert [a.rid for a in second] == [1, 2] and sched.chunked_rid is None


def test_requeued_request_goes_first() -> None:
    tree = cached_tree(ids(1, 2, 3, 4))
    sched = Scheduler("lpm")
    sched.add_request(1, ids(1, 2, 3, 4, 5), max_new_tokens=1)
    sched.requeue(2, ids(8, 8, 8, 9, 9), max_new_tokens=3)
    assert [a.rid for a in sched.select(tree, 100)] == [2, 1]


def test_starvation_guard_uses_injected_time_and_can_be_switched_off() -> None:
    def run(**guard) -> list[int]:
        tree = cached_tree(np.arange(1, 65, dtype=np.int32))
        sched = Scheduler("lpm", max_running_requests=1, max_wait_steps=None, **guard)
        sched.add_request(0, ids(900, 901, 902), max_new_tokens=1, arrival_time=0.0)
        admitted = []
        for step in range(6):
            hot = np.concatenate([np.arange(1, 65, dtype=np.int32), ids(1000 + step)])
            sched.add_request(100 + step, hot, max_new_tokens=1, arrival_time=step * 1.0)
            decision = sched.select(tree, 10_000, now=step * 1.0)
            for admission in decision:
                admitted.append(admission.rid)
                tree.unlock(admission.node)
        return admitted

    guarded = run(max_wait_s=2.5)
    assert guarded.index(0) == 3, guarded  # waited 3 s > 2.5 s: goes ahead of hot requests
    assert 0 not in run(starvation_guard=False)


def test_namespaces_match_the_trees_namespaces() -> None:
    tree = RadixTree()
    tree.insert(ids(1, 2, 3), ids(7, 8, 9), namespace="lora-a")
    sched = Scheduler("fcfs")
    sched.add_request(1, ids(1, 2, 3, 4), 1, namespace="lora-a")
    sched.add_request(2, ids(1, 2, 3, 4), 1, namespace="lora-b")
    sched.add_request(3, ids(1, 2, 3, 4), 1)
    decision = sched.select(tree, 100)
    assert [a.prefix_len for a in decision] == [3, 0, 0]
    assert decision.prefix_slots_of(0).tolist() == [7, 8, 9]


def test_switching_trees_never_reuses_old_matches() -> None:
    tree_a = cached_tree(ids(1, 2, 3, 4, 5))
    tree_b = cached_tree(ids(1, 2), first_slot=500)
    sched = Scheduler("lpm", max_running_requests=1)
    sched.add_request(1, ids(1, 2, 3, 4, 5, 6), 1)
    sched.add_request(2, ids(7, 7, 7), 1)
    sched.select(tree_a, 0)  # ranks (remembers tree_a matches), admits nothing: no memory
    decision = sched.select(tree_b, 100)
    assert decision.admitted[0].prefix_len == 2
    assert decision.prefix_slots_of(0).tolist() == [500, 501]


def test_running_requests_reserve_output() -> None:
    tree = RadixTree()
    sched = Scheduler("fcfs", init_new_token_ratio=0.5, min_new_token_ratio=0.1)
    sched.add_request(1, ids(*range(10)), max_new_tokens=0)
    running = np.array([100, 40], dtype=np.int32)  # reserves 50 + 20
    assert sched.select(tree, 79, running).stop_reason == "memory"
    assert len(sched.select(tree, 80, [100, 40])) == 1


def test_new_token_ratio_knobs() -> None:
    sched = Scheduler(init_new_token_ratio=0.5, min_new_token_ratio=0.1, new_token_ratio_decay_steps=4)
    assert sched.new_token_ratio == pytest.approx(0.5)
    assert sched.decay_new_token_ratio() == pytest.approx(0.4)
    sched.new_token_ratio = 5.0
    assert sched.new_token_ratio == 1.0
    sched.new_token_ratio = 0.0
    assert sched.new_token_ratio == pytest.approx(0.1)
    assert sched.on_retract(100, 199, 2) == pytest.approx(0.7)
    sched.reset_new_token_ratio()
    assert sched.new_token_ratio == pytest.approx(0.5)
    with pytest.raises(ValueError):
        sched.new_token_ratio = float("nan")


def test_queue_errors_are_typed() -> None:
    sched = Scheduler(max_request_tokens=4)
    sched.add_request(1, ids(1, 2), 1)
    with pytest.raises(errors.DuplicateRequestError):
        sched.add_request(1, ids(3), 1)
    with pytest.raises(errors.DuplicateRequestError):
        sched.requeue(1, ids(3), 1)
    with pytest.raises(errors.EmptyPromptError):
        sched.add_request(2, ids(), 1)
    with pytest.raises(errors.RequestTooLargeError):
        sched.add_request(3, ids(1, 2, 3, 4, 5), 1)
    assert isinstance(errors.DuplicateRequestError("x"), ValueError)
    assert sched.remove(1) and not sched.remove(1)
    assert len(sched) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"policy": "longest"},
        {"max_prefill_tokens": 0},
        {"max_running_requests": 0},
        {"max_running_requests": -1},
        {"in_batch_share_min_len": 0},
        {"init_new_token_ratio": 0.1, "min_new_token_ratio": 0.2},
        {"max_wait_s": -1.0},
    ],
)
def test_bad_config_raises_scheduler_config_error(kwargs) -> None:
    with pytest.raises(errors.SchedulerConfigError):
        Scheduler(**kwargs)


@pytest.mark.parametrize("policy", ["lpm", "dfs-weight", "fcfs", "lof", "random"])
def test_every_policy_is_accepted(policy: str) -> None:
    sched = Scheduler(policy)
    assert sched.policy == policy and policy in repr(sched)
    sched.add_request(1, ids(1, 2), 1)
    assert len(sched.select(RadixTree(), 10)) == 1


def test_bad_arguments_raise_python_errors() -> None:
    sched = Scheduler()
    with pytest.raises(ValueError, match="rid"):
        sched.add_request(-1, ids(1), 1)
    with pytest.raises(TypeError, match="rid"):
        sched.add_request("a", ids(1), 1)
    with pytest.raises(ValueError, match="non-negative"):
        sched.add_request(1, ids(1, -2), 1)
    with pytest.raises(TypeError):
        sched.add_request(1, "abc", 1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        sched.add_request(1, ids(1), -5)
    with pytest.raises(ValueError, match="arrival_time"):
        sched.add_request(1, ids(1), 1, arrival_time=float("inf"))
    sched.add_request(1, ids(1, 2), 1)
    with pytest.raises(TypeError):
        sched.select(object(), 10)
    with pytest.raises(ValueError, match="num_free_slots"):
        sched.select(RadixTree(), -1)
    with pytest.raises(ValueError, match="now"):
        sched.select(RadixTree(), 1, now=float("nan"))
    with pytest.raises(ValueError):
        sched.select(RadixTree(), 1, [-3])
    assert len(sched) == 1
    sched.check_invariants()


def test_select_releases_the_gil() -> None:
    """While `select` runs, another Python thread makes progress. With a huge switch interval
    the only way the spinning thread gets the GIL between the two reads is a release inside
    `select`, so a held GIL would give zero progress every time."""
    shared = np.arange(1, 2001, dtype=np.int32)
    tree = cached_tree(shared)
    sched = Scheduler("lpm", max_running_requests=1, max_match_tokens_per_step=1 << 40)

    def fill(base: int) -> None:
        for rid in range(base, base + 2000):
            sched.add_request(rid, np.concatenate([shared, ids(5000 + rid)]), 1)

    counter = [0]
    done = threading.Event()

    def spin() -> None:
        import time

        while not done.is_set():
            counter[0] += 1
            time.sleep(0)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    spinner = threading.Thread(target=spin)
    progress = []
    try:
        spinner.start()
        for attempt in range(5):
            fill(attempt * 10_000)
            before = counter[0]
            sched.select(tree, 10**6)
            progress.append(counter[0] - before)
            if progress[-1] > 0:
                break
    finally:
        done.set()
        sys.setswitchinterval(old_interval)
        spinner.join(timeout=60)
    assert not spinner.is_alive()
    assert any(progress), progress


def test_priority_keys_go_first_and_keep_requeues_within_their_level() -> None:
    sched = Scheduler("fcfs", max_prefill_tokens=1000, max_running_requests=10)
    sched.add_request(1, ids(1, 2), max_new_tokens=1)
    sched.add_request(2, ids(3, 4), max_new_tokens=1, priority_key=-5)
    sched.requeue(3, ids(5, 6), max_new_tokens=1, priority_key=0)
    decision = sched.select(RadixTree(), num_free_slots=1000)
    assert [a.rid for a in decision.admitted] == [2, 3, 1]
