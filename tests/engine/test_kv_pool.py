"""The KV owner (`KVPool`): ownership rules, slot and row accounting, and a stateful property
test that runs random request lifecycles and checks every invariant after each operation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sglr.engine.kv import KVPool, KVSlotAllocator, RequestKV
from sglr.engine.kv.rows import RowAllocator
from sglr.errors import SlotAccountingError


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def run_request(pool: KVPool, tokens: np.ndarray, keep: bool = True) -> RequestKV:
    """A request's whole life: match and lock (the scheduler's part), admit, compute, release."""
    kv = RequestKV()
    slots, node = pool.tree.match_prefix(tokens)
    if node is not None:
        pool.tree.lock(node)
    assert pool.admit(kv, slots, node)
    assert pool.reserve([kv], [tokens.size - slots.size])
    pool.commit(kv)
    pool.release(kv, tokens, None, keep=keep)
    return kv


def assert_slots_partitioned(pool: KVPool, holders: list[RequestKV]) -> None:
    """Every slot id 1..N is exactly one of: free, in the tree, owned by one request."""
    free = pool.free_slots._free_stack[: pool.free_slots.num_free].tolist()
    cached = [slot for _, _, slots, _ in pool.tree.dump() for slot in slots] if pool.reuses_kv else []
    owned = [int(s) for kv in holders for s in kv.slots[kv.num_tree_owned : kv.num_reserved]]
    everything = free + cached + owned
    assert sorted(everything) == list(range(1, pool.num_slots + 1))


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


def test_request_rows_are_allocated_once_and_detect_double_free() -> None:
    rows = RowAllocator(max_num_reqs=3)
    taken = [rows.try_alloc() for _ in range(3)]
    assert sorted(taken) == [1, 2, 3] and rows.try_alloc() is None
    rows.check_invariants()
    rows.free(taken[1])
    with pytest.raises(SlotAccountingError):
        rows.free(taken[1])
    with pytest.raises(SlotAccountingError):
        rows.free(0)  # the padding row is never handed out
    assert rows.try_alloc() == taken[1]
    rows.check_invariants()


def test_sharing_frees_recomputed_duplicates_only_and_marks_the_row_for_rewrite() -> None:
    pool = KVPool(16, max_num_reqs=4)
    run_request(pool, ids(1, 2, 3, 4))
    first, _ = pool.tree.match_prefix(ids(1, 2, 3, 4))
    assert pool.num_free_slots == 12
    # A second request recomputed [1, 2] itself (it was admitted before the first was cached).
    kv = RequestKV()
    assert pool.admit(kv, ids(), None)
    assert pool.reserve([kv], [3])
    own = kv.pending_slots().copy()
    pool.commit(kv)
    pool.share(kv, ids(1, 2, 5), None)
    # Its two duplicate slots went back; it now reads the tree's, and its row must be rewritten.
    assert kv.computed_slots().tolist() == [*first[:2].tolist(), own[2]]
    assert pool.num_free_slots == 16 - 5
    writes = pool.take_row_writes([kv])
    assert (
        writes is not None and writes.cols.tolist() == [0, 1] and writes.slots.tolist() == first[:2].tolist()
    )
    assert pool.take_row_writes([kv]) is None  # taken once
    pool.check_invariants()
    assert_slots_partitioned(pool, [kv])
    pool.release(kv, ids(1, 2, 5), None, keep=True)
    pool.check_invariants()


def test_matched_tree_slots_stay_the_trees() -> None:
    pool = KVPool(8, max_num_reqs=2)
    run_request(pool, ids(1, 2, 3))
    run_request(pool, ids(1, 2, 3, 4))  # matches 3, computes 1
    assert pool.num_free_slots == 4 and pool.num_cached_slots == 4
    pool.check_invariants()


def test_reserve_evicts_unlocked_prefixes_but_not_locked_ones() -> None:
    pool = KVPool(6, max_num_reqs=2)
    run_request(pool, ids(1, 2, 3))
    run_request(pool, ids(7, 8, 9))
    kv = RequestKV()
    slots, node = pool.tree.match_prefix(ids(1, 2, 3))
    pool.tree.lock(node)
    assert pool.admit(kv, slots, node)
    assert not pool.can_reserve(4) and not pool.reserve([kv], [4])  # only 3 evictable
    assert pool.reserve([kv], [3])
    assert pool.tree.match_prefix(ids(7, 8, 9))[0].size == 0
    assert pool.tree.match_prefix(ids(1, 2, 3))[0].size == 3
    pool.check_invariants()
    with pytest.raises(SlotAccountingError, match="locks"):
        pool.reset()
    pool.release(kv, ids(1, 2, 3), None, keep=False)
    stolen = pool.free_slots.try_alloc(1)  # taken behind the pool's back: a leak
    with pytest.raises(SlotAccountingError, match="leak"):
        pool.check_invariants()
    pool.free_slots.free(stolen)
    pool.reset()
    assert pool.num_free_slots == 6


def test_admit_without_a_free_row_gives_the_lock_back() -> None:
    pool = KVPool(8, max_num_reqs=1)
    run_request(pool, ids(1, 2))
    holder = RequestKV()
    assert pool.admit(holder, ids(), None)
    slots, node = pool.tree.match_prefix(ids(1, 2))
    pool.tree.lock(node)
    assert not pool.admit(RequestKV(), slots, node)
    assert pool.tree.protected_size() == 0
    pool.check_invariants()


def test_a_draft_path_that_is_not_a_prefix_of_the_reservation_is_refused() -> None:
    pool = KVPool(16, max_num_reqs=2)
    kv = RequestKV()
    assert pool.admit(kv, np.zeros(0, np.int32), None)
    assert pool.reserve([kv], [4])
    for bad in ([], [1, 2], [0, 4], [0, 2, 2]):
        with pytest.raises(SlotAccountingError):
            pool.commit_path(kv, bad)
    pool.commit_path(kv, [0, 2])
    with pytest.raises(SlotAccountingError):
        pool.truncate(kv, 3)
    pool.check_invariants()


def test_without_reuse_nothing_matches_and_release_frees_everything() -> None:
    pool = KVPool(4, max_num_reqs=2, use_radix_cache=False)
    run_request(pool, ids(1, 2, 3))
    assert pool.tree.match_prefix(ids(1, 2, 3))[0].size == 0
    assert pool.num_free_slots == 4 and pool.num_cached_slots == 0
    pool.check_invariants()


class KVPoolMachine(RuleBasedStateMachine):
    """Random interleavings of the engine's calls; every invariant is checked after each one."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = KVPool(48, max_num_reqs=4)
        self.running: list[tuple[RequestKV, list[int]]] = []  # (kv, tokens computed or reserved)

    @rule(tokens=st.lists(st.integers(0, 3), min_size=1, max_size=12))
    def admit(self, tokens: list[int]) -> None:
        array = np.array(tokens, dtype=np.int32)
        slots, node = self.pool.tree.match_prefix(array)
        if slots.size == array.size:  # a request computes at least its last token
            slots, node = self.pool.tree.match_prefix(array[:-1])
        if node is not None:
            self.pool.tree.lock(node)
        kv = RequestKV()
        if not self.pool.admit(kv, slots, node):
            return
        if self.pool.reserve([kv], [array.size - slots.size]):
            self.pool.commit(kv)
            self.running.append((kv, tokens))
        else:
            self.pool.release(kv, array[: kv.num_computed], None, keep=False)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 3), extra=st.lists(st.integers(0, 3), min_size=1, max_size=4))
    def extend(self, index: int, extra: list[int]) -> None:
        kv, tokens = self.running[index % len(self.running)]
        if self.pool.reserve([kv], [len(extra)]):
            self.pool.commit(kv)
            tokens.extend(extra)

    @precondition(lambda self: self.running)
    @rule(
        index=st.integers(0, 3),
        num_drafts=st.integers(0, 5),
        picks=st.lists(st.booleans(), min_size=5, max_size=5),
        token=st.integers(0, 3),
    )
    def verify(self, index: int, num_drafts: int, picks: list[bool], token: int) -> None:
        """A speculative verify pass: the last token and drafts reserved, an accepted path kept."""
        kv, tokens = self.running[index % len(self.running)]
        if not self.pool.reserve([kv], [1 + num_drafts]):
            return
        pending = kv.pending_slots().copy()
        kept = [0] + [1 + i for i in range(num_drafts) if picks[i]]
        start = kv.num_computed
        self.pool.commit_path(kv, kept)
        assert kv.slots[start : kv.num_computed].tolist() == pending[kept].tolist()
        assert kv.num_pending == 0
        if len(kept) > 1:  # the accepted drafts' columns are rewritten by the next batch
            assert kv.stale_cols is not None and set(range(start + 1, start + len(kept))) <= set(
                kv.stale_cols
            )
        tokens.extend([token] * len(kept))

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 3), fraction=st.floats(0, 1))
    def truncate(self, index: int, fraction: float) -> None:
        """A request that stopped inside an accepted run gives back the tokens after the stop."""
        kv, tokens = self.running[index % len(self.running)]
        num_computed = kv.num_tree_owned + int(fraction * (kv.num_computed - kv.num_tree_owned))
        self.pool.truncate(kv, num_computed)
        del tokens[num_computed:]
        assert kv.num_computed == kv.num_reserved == num_computed

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 3))
    def share(self, index: int) -> None:
        kv, tokens = self.running[index % len(self.running)]
        self.pool.share(kv, np.array(tokens, dtype=np.int32), None)
        self.pool.take_row_writes([kv])

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 3), keep=st.booleans())
    def release(self, index: int, keep: bool) -> None:
        kv, tokens = self.running.pop(index % len(self.running))
        self.pool.release(kv, np.array(tokens, dtype=np.int32), None, keep=keep)

    @rule(num_tokens=st.integers(1, 60))
    def pressure(self, num_tokens: int) -> None:
        """Another request's allocation: evicts when short, never touches locked prefixes."""
        protected = self.pool.tree.protected_size()
        if self.pool.can_reserve(num_tokens):
            kv = RequestKV()
            if self.pool.admit(kv, np.zeros(0, np.int32), None):
                assert self.pool.reserve([kv], [num_tokens])
                self.pool.release(kv, np.zeros(0, np.int32), None, keep=False)
        assert self.pool.tree.protected_size() == protected

    @precondition(lambda self: not self.running)
    @rule()
    def flush(self) -> None:
        self.pool.reset()
        assert self.pool.num_free_slots == self.pool.num_slots

    @invariant()
    def accounting_holds(self) -> None:
        self.pool.check_invariants()
        assert_slots_partitioned(self.pool, [kv for kv, _ in self.running])
        for kv, tokens in self.running:
            # The tree's part of a running request is exactly what the tree holds for it.
            cached, _ = self.pool.tree.match_prefix(np.array(tokens[: kv.num_tree_owned], dtype=np.int32))
            assert cached.tolist() == kv.slots[: kv.num_tree_owned].tolist()


KVPoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_kv_pool_state_machine = KVPoolMachine.TestCase
