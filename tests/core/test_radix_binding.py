"""The `sglr._core.RadixTree` binding surface: types, errors, GIL release."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sglr import errors
from sglr._core import RadixTree


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def test_match_insert_roundtrip_returns_int32_numpy() -> None:
    tree = RadixTree()
    assert tree.insert(ids(1, 2, 3, 4), ids(10, 11, 12, 13)) == 0
    slots, node = tree.match_prefix(ids(1, 2, 3, 9))
    assert isinstance(slots, np.ndarray) and slots.dtype == np.int32
    assert slots.tolist() == [10, 11, 12]
    assert isinstance(node, int)
    assert tree.insert(ids(1, 2, 3, 4, 5), ids(20, 21, 22, 23, 24)) == 4
    assert tree.total_size() == 5
    tree.check_invariants()


@pytest.mark.parametrize(
    "make",
    [
        lambda v: np.array(v, dtype=np.int32),
        lambda v: np.array(v, dtype=np.uint32),
        lambda v: np.array(v, dtype=np.int64),
        list,
        tuple,
    ],
    ids=["int32", "uint32", "int64", "list", "tuple"],
)
def test_accepts_numpy_and_sequences(make) -> None:
    tree = RadixTree()
    tree.insert(make([5, 6, 7]), make([1, 2, 3]))
    slots, _ = tree.match_prefix(make([5, 6]))
    assert slots.tolist() == [1, 2]


def test_non_contiguous_int32_array_is_rejected_clearly() -> None:
    tree = RadixTree()
    with pytest.raises(ValueError, match="contiguous"):
        tree.match_prefix(np.arange(10, dtype=np.int32)[::2])


@pytest.mark.parametrize("bad", [[-1, 2], [2**32], "abc", [1.5], [[1, 2]]])
def test_bad_token_input_raises_typed_python_errors(bad) -> None:
    tree = RadixTree()
    with pytest.raises((TypeError, ValueError)):
        tree.match_prefix(bad)


def test_negative_int32_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        RadixTree().insert(ids(1, -2), ids(1, 2))


def test_length_mismatch_maps_to_sglr_error() -> None:
    tree = RadixTree()
    with pytest.raises(errors.LengthMismatchError, match="2 tokens, 3 slots"):
        tree.insert(ids(1, 2), ids(1, 2, 3))
    assert tree.total_size() == 0


def test_lock_protects_and_unlock_below_zero_is_typed() -> None:
    tree = RadixTree()
    tree.insert(ids(1, 2, 3), ids(7, 8, 9))
    _, node = tree.match_prefix(ids(1, 2, 3))
    tree.lock(node)
    assert (tree.evictable_size(), tree.protected_size()) == (0, 3)
    assert tree.evict(10).size == 0
    assert tree.lock_ref(node) == 1
    tree.unlock(node)
    with pytest.raises(errors.UnlockError):
        tree.unlock(node)
    assert isinstance(errors.UnlockError("x"), ValueError)


def test_stale_and_unknown_handles() -> None:
    tree = RadixTree()
    tree.insert(ids(1, 2), ids(3, 4))
    _, node = tree.match_prefix(ids(1, 2))
    assert sorted(tree.evict(2).tolist()) == [3, 4]
    with pytest.raises(errors.StaleNodeError):
        tree.lock(node)
    with pytest.raises(errors.UnknownNodeError):
        tree.lock(12345)
    _, node = tree.match_prefix(ids(9))
    tree.reset()
    with pytest.raises(errors.StaleNodeError):
        tree.lock(node)


def test_namespaces_never_share() -> None:
    tree = RadixTree()
    tree.insert(ids(1, 2, 3), ids(1, 2, 3), namespace="adapter-a")
    assert tree.match_prefix(ids(1, 2, 3))[0].size == 0
    assert tree.match_prefix(ids(1, 2, 3), namespace="adapter-b")[0].size == 0
    assert tree.match_prefix(ids(1, 2, 3), namespace="adapter-a")[0].tolist() == [1, 2, 3]


def test_dump_shows_split_structure() -> None:
    tree = RadixTree()
    tree.insert(ids(1, 2, 3, 4), ids(1, 2, 3, 4))
    tree.insert(ids(1, 2, 8), ids(5, 6, 7))
    assert tree.dump() == [
        (1, [1, 2], [1, 2], 0),
        (2, [3, 4], [3, 4], 0),
        (2, [8], [7], 0),
    ]
    assert "num_nodes=3" in repr(tree)


def test_long_inputs_release_the_gil_and_stay_consistent() -> None:
    """Threads hammering one tree with GIL-releasing inputs neither deadlock nor corrupt it."""
    tree = RadixTree()
    shared = np.arange(1, 5000, dtype=np.int32)
    failures: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for step in range(30):
                own = rng.integers(10_000, 20_000, size=100, dtype=np.int32)
                seq = np.concatenate([shared, own])
                base = (seed * 100 + step + 1) * 10_000
                slots = np.arange(base, base + seq.size, dtype=np.int32)
                tree.insert(seq, slots)
                matched, _ = tree.match_prefix(seq)
                assert matched.size == seq.size
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not failures
    tree.check_invariants()


def test_batch_calls_match_the_single_calls() -> None:
    tree = RadixTree()
    sequences = [ids(1, 2, 3), ids(1, 2, 4), ids(5)]
    slots = [ids(10, 11, 12), ids(20, 21, 22), ids(30)]
    assert tree.insert_batch(sequences, slots) == [0, 2, 0]
    slots_flat, offsets, nodes = tree.match_prefix_batch([ids(1, 2, 3, 9), ids(5), ids(7)])
    assert offsets.tolist() == [0, 3, 4, 4]
    assert slots_flat.tolist() == [10, 11, 12, 30]
    assert nodes[:2] == [tree.match_prefix(ids(1, 2, 3))[1], tree.match_prefix(ids(5))[1]]
    tree.lock_batch(nodes[:2])
    assert tree.protected_size() == 4
    with pytest.raises(errors.UnlockError):
        tree.unlock_batch([nodes[0], nodes[0]])
    assert tree.protected_size() == 4  # all or nothing
    tree.unlock_batch(nodes[:2])
    with pytest.raises(ValueError, match="2 sequences but slots_list has 1"):
        tree.insert_batch(sequences[:2], slots[:1])
    with pytest.raises(errors.LengthMismatchError):
        tree.insert_batch([ids(8, 9)], [ids(1)])
    with pytest.raises(TypeError):
        tree.match_prefix_batch(5)
    tree.check_invariants()
