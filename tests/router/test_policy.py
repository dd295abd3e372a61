"""Routing properties of `sglr.router.Router`, one policy at a time."""

from array import array
from collections import Counter

import pytest

from sglr.errors import NoReplicaAvailableError, RouterConfigError
from sglr.router import Router, RouterConfig


def prompt(group: int, suffix: int, prefix_len: int = 64) -> list[int]:
    return [1000 + group] * prefix_len + [suffix, suffix + 1]


def test_same_prefix_goes_to_the_same_replica_while_balanced() -> None:
    router = Router([0, 1, 2], RouterConfig(policy="cache-aware"))
    chosen: dict[int, set[int]] = {}
    for suffix in range(10):
        for group in range(6):
            replica = router.route(prompt(group, suffix))
            router.finish(replica)
            chosen.setdefault(group, set()).add(replica)
    assert all(len(replicas) == 1 for replicas in chosen.values())
    # New prefixes spread: every replica got two of the six groups.
    assert Counter(next(iter(replicas)) for replicas in chosen.values()) == {0: 2, 1: 2, 2: 2}


def test_u32_array_keys_route_as_lists_do() -> None:
    # The router's HTTP front keys on array("I") ids (short ones read as a sequence, long ones
    # as a numpy view); engine fronts pass lists.
    from_lists = Router([0, 1, 2], RouterConfig(policy="cache-aware"))
    from_arrays = Router([0, 1, 2], RouterConfig(policy="cache-aware"))
    for suffix in range(4):
        for group in range(6):
            key = prompt(group, suffix, prefix_len=4 if group % 2 else 64)
            replica = from_lists.route(key)
            assert from_arrays.route(array("I", key)) == replica
            from_lists.finish(replica)
            from_arrays.finish(replica)
    assert [from_arrays.num_routed_keys(r) for r in range(3)] == [
        from_lists.num_routed_keys(r) for r in range(3)
    ]
    from_arrays.check_invariants()


def test_imbalance_spreads_a_hot_prefix() -> None:
    config = RouterConfig(policy="cache-aware", balance_abs_threshold=4, balance_rel_threshold=1.5)
    router = Router([0, 1], config)
    replicas = [router.route(prompt(0, suffix)) for suffix in range(40)]  # none finishes
    counts = Counter(replicas)
    assert counts[0] > 0 and counts[1] > 0
    most, least = max(counts.values()), min(counts.values())
    # The router lets load drift only until both thresholds are crossed, then evens it out.
    assert (
        most - least <= config.balance_abs_threshold + 1 or most <= config.balance_rel_threshold * least + 1
    )
    assert least >= 10
    assert router.num_in_flight() == counts


def test_a_removed_replica_gets_nothing() -> None:
    for policy in ("cache-aware", "round-robin", "shortest-queue", "random"):
        router = Router([0, 1, 2], RouterConfig(policy=policy))
        first = router.route(prompt(0, 0))
        router.remove_replica(first)
        router.finish(first)  # a request sent before the removal still ends cleanly
        picked = {router.route(prompt(group % 3, group)) for group in range(30)}
        assert first not in picked and picked, policy
        for replica in router.replica_ids:
            router.remove_replica(replica)
        with pytest.raises(NoReplicaAvailableError):
            router.route(prompt(0, 0))


def test_round_robin_and_shortest_queue() -> None:
    router = Router([0, 1, 2], RouterConfig(policy="round-robin"))
    assert [router.route([1]) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    router = Router([0, 1], RouterConfig(policy="shortest-queue"))
    assert router.route([1]) == 0
    assert router.route([1]) == 1
    router.finish(1)
    assert router.route([1]) == 1


def test_text_keys_route_by_shared_prefix() -> None:
    router = Router([0, 1], RouterConfig(policy="cache-aware"))
    system = "You are a helpful assistant. " * 8
    first = router.route(system + "question one")
    assert router.route(system + "question two") == first
    assert router.route("something else entirely") != first
    assert router.num_routed_keys(first) > len(system)


def test_bad_config_is_refused() -> None:
    with pytest.raises(RouterConfigError):
        RouterConfig(policy="fastest")
    with pytest.raises(RouterConfigError):
        RouterConfig(balance_rel_threshold=0.5)
