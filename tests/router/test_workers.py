"""`WorkerPool` (membership, health, fresh replica ids) and the routing keys of API bodies."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest
import tomllib
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sglr.errors import DuplicateWorkerError, NoReplicaAvailableError, RouterConfigError, UnknownWorkerError
from sglr.router import RouterConfig
from sglr.router.keys import routing_key
from sglr.router.workers import WorkerPool

A, B = "http://127.0.0.1:1001", "http://127.0.0.1:1002"


def test_failed_worker_leaves_and_returns_under_a_fresh_id() -> None:
    pool = WorkerPool([A, B + "/"], RouterConfig(policy="round-robin"))
    assert [w.url for w in pool.workers] == [A, B]
    routes = [pool.route("x") for _ in range(4)]
    assert {r.worker.url for r in routes} == {A, B}
    a = pool.get(A)
    old_id = a.replica_id
    pool.mark_failed(a, "connection reset")
    assert not a.healthy and a.last_error == "connection reset"
    assert {pool.route("x").worker.url for _ in range(4)} == {B}
    pool.mark_healthy(a)
    assert a.healthy and a.replica_id != old_id
    # Requests routed before the failure end without touching the new id's count.
    for route in routes:
        pool.finish(route)
    assert pool.num_in_flight(a) == 0 and pool.num_in_flight(pool.get(B)) == 4
    pool.check_invariants()


def test_health_failures_count_up_to_the_threshold() -> None:
    pool = WorkerPool([A])
    worker = pool.get(A)
    pool.mark_failed(worker, "timeout", failure_threshold=3)
    pool.mark_failed(worker, "timeout", failure_threshold=3)
    assert worker.healthy
    pool.mark_healthy(worker)  # a success resets the count
    for _ in range(3):
        pool.mark_failed(worker, "timeout", failure_threshold=3)
    assert not worker.healthy
    with pytest.raises(NoReplicaAvailableError):
        pool.route("x")
    pool.check_invariants()


def test_membership_errors() -> None:
    pool = WorkerPool([A])
    with pytest.raises(DuplicateWorkerError):
        pool.add_worker(A + "/", healthy=True)
    with pytest.raises(UnknownWorkerError):
        pool.remove_worker(B)
    with pytest.raises(RouterConfigError):
        pool.add_worker("localhost:8000", healthy=True)
    removed = pool.remove_worker(A)
    pool.mark_healthy(removed)  # a late health check of a removed worker changes nothing
    assert pool.workers == [] and pool.router.replica_ids == []
    pool.check_invariants()


def test_routing_keys() -> None:
    assert routing_key("/generate", {"text": "abc"}) == "abc"
    assert routing_key("/generate", {"text": ["first", "second"]}) == "first"
    # Ids come back as a u32 array (the trees read it without a copy).
    assert routing_key("/generate", {"input_ids": [[5, 6], [7]], "text": "ignored"}) == array("I", [5, 6])
    assert routing_key("/v1/completions", {"prompt": [1, 2, 3]}) == array("I", [1, 2, 3])
    assert routing_key("/v1/completions", {"prompt": [0, 2**32 - 1]}) == array("I", [0, 2**32 - 1])
    long_ids = list(range(2, 300))
    assert routing_key("/generate", {"input_ids": long_ids}) == array("I", long_ids)
    for not_ids in ([1, -2], [1, 2**32], [True], [1, 2.0], [1, None], [1, "2"], [1, [2]]):
        assert routing_key("/v1/completions", {"prompt": not_ids}) == ""
        # A long prompt is checked another way: the same verdicts, wherever the odd one is.
        # (First, a string or a list would make the prompt a batch, keyed on its first item.)
        for at in (150, -1) if isinstance(not_ids[-1], (str, list)) else (0, 150, -1):
            spoiled = long_ids.copy()
            spoiled[at] = not_ids[-1]
            assert routing_key("/generate", {"input_ids": spoiled}) == ""
    with_zero_and_one = [0, 1, *long_ids]  # ids 0 and 1 are ids, not bools
    assert routing_key("/generate", {"input_ids": with_zero_and_one}) == array("I", with_zero_and_one)
    chat = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "U"}]}]}  # fmt: skip
    assert routing_key("/v1/chat/completions", chat) == "system\nS\nuser\nU\n"
    # The next turn of a conversation extends the key of the turn before.
    longer = {"messages": [*chat["messages"], {"role": "assistant", "content": "A"}]}
    assert routing_key("/v1/chat/completions", longer).startswith(routing_key("/v1/chat/completions", chat))
    assert routing_key("/generate", None) == "" and routing_key("/generate", {"text": 3}) == ""


def test_console_script_points_at_the_router() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    module, _, name = pyproject["project"]["scripts"]["sglr-router"].partition(":")
    from importlib import import_module

    main = getattr(import_module(module), name)
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0


class WorkerPoolMachine(RuleBasedStateMachine):
    """Random membership, health and routing; invariants after every operation: requests go
    only to healthy members, in-flight counts match the model, a worker that left and came
    back starts from zero whatever it had in flight before."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = WorkerPool([], RouterConfig(policy="cache-aware"))
        self.members: dict[str, bool] = {}  # url -> healthy
        self.routes: list = []
        self.next_port = 2000

    @rule()
    def add(self) -> None:
        url = f"http://127.0.0.1:{self.next_port}"
        self.next_port += 1
        self.pool.add_worker(url, healthy=True)
        self.members[url] = True

    @precondition(lambda self: self.members)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        url = data.draw(st.sampled_from(sorted(self.members)))
        self.pool.remove_worker(url)
        del self.members[url]

    @precondition(lambda self: self.members)
    @rule(data=st.data(), healthy=st.booleans())
    def health(self, data: st.DataObject, healthy: bool) -> None:
        url = data.draw(st.sampled_from(sorted(self.members)))
        worker = self.pool.get(url)
        if healthy:
            self.pool.mark_healthy(worker)
        else:
            self.pool.mark_failed(worker, "probe failed")
        self.members[url] = healthy

    @rule(group=st.integers(0, 3))
    def route(self, group: int) -> None:
        if not any(self.members.values()):
            with pytest.raises(NoReplicaAvailableError):
                self.pool.route([group] * 4)
            return
        route = self.pool.route([group] * 4)
        assert self.members.get(route.worker.url) is True
        self.routes.append(route)

    @precondition(lambda self: self.routes)
    @rule(data=st.data(), failed=st.booleans())
    def finish(self, data: st.DataObject, failed: bool) -> None:
        self.pool.finish(self.routes.pop(data.draw(st.integers(0, len(self.routes) - 1))), failed=failed)

    @invariant()
    def consistent(self) -> None:
        self.pool.check_invariants()
        assert {w.url: w.healthy for w in self.pool.workers} == self.members
        for worker in self.pool.workers:
            expected = sum(r.replica_id == worker.replica_id for r in self.routes) if worker.healthy else 0
            assert self.pool.num_in_flight(worker) == expected


WorkerPoolMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=40, deadline=None)
test_worker_pool_state_machine = WorkerPoolMachine.TestCase
