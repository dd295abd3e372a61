"""`sglr._core.PrefixForest` through the binding: typed errors, bounds, GIL-released paths."""

import numpy as np
import pytest

from sglr._core import PrefixForest
from sglr.errors import DuplicateReplicaError, RouterConfigError, UnknownReplicaError


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
