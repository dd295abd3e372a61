"""`sglr._core.PrefixForest` through the binding: typed errors, bounds, GIL-released paths."""

import numpy as np
import pytest

from sglr._core import PrefixForest
from sglr.errors import (
    DuplicateReplicaError,
    NoReplicaAvailableError,
    RouterConfigError,
    UnknownReplicaError,
)


def test_best_match_and_errors() -> None:
    forest = PrefixForest(100)
    forest.add_replica(0)
    forest.add_replica(1)
    forest.insert(1, [5, 6, 7])
    assert forest.best_match([5, 6, 9]) == (1, 2)
    assert sorted(forest.match_lens(np.array([5, 6, 7], dtype=np.int32))) == [(0, 0), (1, 3)]
    with pytest.raises(DuplicateReplicaError):
        forest.add_replica(1)
    forest.remove_replica(1)
    with pytest.raises(UnknownReplicaError):
        forest.insert(1, [1])
    assert forest.best_match([5, 6]) == (0, 0)
    with pytest.raises(RouterConfigError):
        PrefixForest(0)
    forest.check_invariants()


def test_long_keys_stay_within_the_bound() -> None:
    forest = PrefixForest(5000)
    forest.add_replica(3)
    rng = np.random.default_rng(0)
    for _ in range(4):
        forest.insert(3, rng.integers(0, 50_000, size=3000, dtype=np.int64))
    assert forest.num_keys(3) <= 5000
    forest.check_invariants()


def _route_in_two_steps(forest: PrefixForest, key: np.ndarray, loads: dict[int, int]) -> tuple[int, int]:
    """The router's former choice (thresholds 4 / 1.5 / 0.5): best_match, then insert.
    Returns the replica and the length matched there before the insert."""
    most, least = max(loads.values()), min(loads.values())
    if most - least > 4 and most > 1.5 * least:
        replica = min(sorted(loads), key=lambda r: (loads[r], r))
    else:
        best = forest.best_match(key)
        if best is not None and len(key) and best[1] / len(key) >= 0.5:
            replica = best[0]
        else:
            replica = min(sorted(loads), key=lambda r: (forest.num_keys(r), loads[r], r))
    matched = dict(forest.match_lens(key))[replica]
    forest.insert(replica, key)
    return replica, matched


def test_route_chooses_and_records_as_the_two_steps_did() -> None:
    one_call, two_steps = PrefixForest(20_000), PrefixForest(20_000)
    for replica in (0, 1, 2):
        one_call.add_replica(replica)
        two_steps.add_replica(replica)
    rng = np.random.default_rng(1)
    prefixes = [rng.integers(0, 70_000, size=int(rng.integers(1, 3000)), dtype=np.int64) for _ in range(6)]
    replicas, num_hits = set(), 0
    for step in range(60):
        own = rng.integers(0, 70_000, size=int(rng.integers(0, 600)), dtype=np.int64)
        key = np.concatenate([prefixes[step % len(prefixes)], own])
        loads = {replica: int(rng.integers(0, 12)) for replica in (0, 1, 2)}
        routed = one_call.route(key, loads, 4, 1.5, 0.5)
        assert routed == _route_in_two_steps(two_steps, key, loads)
        replicas.add(routed[0])
        num_hits += routed[1] > 0
        assert [one_call.num_keys(r) for r in (0, 1, 2)] == [two_steps.num_keys(r) for r in (0, 1, 2)]
    assert replicas == {0, 1, 2} and num_hits > 10
    one_call.check_invariants()


def test_route_errors() -> None:
    forest = PrefixForest(100)
    forest.add_replica(0)
    with pytest.raises(NoReplicaAvailableError):
        forest.route([1, 2], {}, 32, 1.5, 0.5)
    with pytest.raises(UnknownReplicaError):
        forest.route([1, 2], {0: 0, 7: 0}, 32, 1.5, 0.5)
    assert forest.num_keys(0) == 0
    assert forest.route([1, 2], {0: 3}, 32, 1.5, 0.5) == (0, 0)
    assert forest.route([1, 2, 3], {0: 3}, 32, 1.5, 0.5) == (0, 2)
