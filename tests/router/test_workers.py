"""`WorkerPool` (membership, health, fresh replica ids) and the routing keys of API bodies."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

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
    assert routing_key("/generate", {"input_ids": [[5, 6], [7]], "text": "ignored"}) == [5, 6]
    assert routing_key("/v1/completions", {"prompt": [1, 2, 3]}) == [1, 2, 3]
    assert routing_key("/v1/completions", {"prompt": [1, -2]}) == ""
    assert routing_key("/v1/completions", {"prompt": [True]}) == ""
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
