"""KVSlotAllocator and the prefix caches: ownership rules and slot accounting."""

from __future__ import annotations

import numpy as np
import pytest

from sglr.engine.kv_slots import KVSlotAllocator
from sglr.engine.prefix_cache import NullPrefixCache, RadixPrefixCache
from sglr.errors import SlotAccountingError


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def test_allocator_never_hands_out_slot_zero_and_detects_double_free() -> None:
    allocator = KVSlotAllocator(4)
    slots = allocator.try_alloc(4)
    assert sorted(slots.tolist()) == [1, 2, 3, 4]
    assert allocator.try_alloc(1) is None
    allocator.free(slots[:2])
    with pytest.raises(SlotAccountingError, match="double free"):
        allocator.free(slots[:1])
    with pytest.raises(SlotAccountingError, match="outside"):
        allocator.free(ids(0))
    with pytest.raises(SlotAccountingError, match="double free"):
        allocator.free(np.concatenate([slots[2:3], slots[2:3]]))
    assert allocator.num_free == 2


def test_radix_cache_frees_recomputed_duplicates_only() -> None:
    cache = RadixPrefixCache(KVSlotAllocator(16))
    first = cache.try_alloc(4)
    cache.cache(ids(1, 2, 3, 4), first)
    assert cache.allocator.num_free == 12
    # A second request recomputed [1, 2] itself (e.g. it ran concurrently) and adds [5].
    match = cache.match(ids(1, 2, 5))
    assert match.matched_len == 2
    own = cache.try_alloc(3)
    canonical = cache.cache(ids(1, 2, 5), own)
    # Its two duplicate slots went back; the tree kept the original ones.
    assert canonical.slots.tolist() == [*first[:2].tolist(), own[2]]
    assert cache.allocator.num_free == 16 - 5
    cache.check_invariants(num_slots_held=0)


def test_radix_cache_keeps_matched_tree_slots() -> None:
    cache = RadixPrefixCache(KVSlotAllocator(8))
    cache.cache(ids(1, 2, 3), cache.try_alloc(3))
    match = cache.match(ids(1, 2, 3, 4))
    cache.lock(match.node)
    tail = cache.try_alloc(1)
    cache.cache(ids(1, 2, 3, 4), np.concatenate([match.slots, tail]))
    cache.unlock(match.node)
    assert cache.allocator.num_free == 4
    cache.check_invariants(num_slots_held=0)


def test_try_alloc_evicts_unlocked_prefixes_but_not_locked_ones() -> None:
    cache = RadixPrefixCache(KVSlotAllocator(6))
    cache.cache(ids(1, 2, 3), cache.try_alloc(3))
    cache.cache(ids(7, 8, 9), cache.try_alloc(3))
    locked = cache.match(ids(1, 2, 3))
    cache.lock(locked.node)
    assert cache.try_alloc(4) is None  # only 3 evictable
    slots = cache.try_alloc(3)
    assert slots is not None and slots.size == 3
    assert cache.match(ids(7, 8, 9)).matched_len == 0
    assert cache.match(ids(1, 2, 3)).matched_len == 3
    cache.check_invariants(num_slots_held=3)
    with pytest.raises(SlotAccountingError, match="leak"):
        cache.check_invariants(num_slots_held=0)
    with pytest.raises(SlotAccountingError, match="locked"):
        cache.reset()
    cache.unlock(locked.node)
    cache.allocator.free(slots)
    cache.reset()
    assert cache.allocator.num_free == 6


def test_null_cache_never_matches_and_frees_on_cache() -> None:
    cache = NullPrefixCache(KVSlotAllocator(4))
    slots = cache.try_alloc(3)
    assert cache.cache(ids(1, 2, 3), slots).matched_len == 0
    assert cache.match(ids(1, 2, 3)).matched_len == 0
    assert cache.allocator.num_free == 4
    cache.check_invariants(num_slots_held=0)
