"""`KVPool`: the one owner of the engine's KV memory.

It alone allocates and frees KV slots and request rows, holds the prefix index and evicts from
it. The contract, in the order a request meets it:

1. match and lock: the Rust scheduler matches waiting prompts in `tree` and locks the prefixes
   it admits; `admit` takes over such a lock with the matched slots and gives the request a row
   (when no row is free it drops the lock and returns False).
2. allocate: `reserve` takes slots for the tokens the next forward pass computes, evicting
   least-recently-used cached prefixes when the free list is short (the only place anything is
   evicted); all requests of the call or none.
3. after the pass: `commit` marks the reserved KV as written; a speculative verify pass keeps
   only its accepted path (`commit_path`: the last token and the accepted drafts, the rejected
   drafts' slots freed), and a request that stops inside an accepted run gives back the KV of
   tokens it will not take (`truncate`).
4. `share` hands a running request's written KV to the index (at a chunk boundary, or when its
   prompt completes) and moves its lock there, so requests arriving meanwhile reuse it.
5. `release` ends the hold: a finished or retracted request's written KV goes into the index, an
   aborted one's back to the free list; the lock and the row go.

`check_invariants`: free + cached + held by requests == total slots, free + held rows == total
rows, plus the tree's own invariants; the engine runs it after every step in tests.

With a second tier (`attach_tiers`, `tiers.py`) the pool also tells it of every insert into the
index and every eviction from it, starts reads of stored pages for arriving prompts (`prefetch`)
and, before each admission pass, puts what was read into fresh slots and the index
(`load_prefetched`), so the scheduler's match counts stored prefixes as cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sglr.engine.kv.open_tiers import open_tiers
from sglr.engine.kv.prefix_index import Inserted, NullIndex, RadixIndex
from sglr.engine.kv.request_kv import RequestKV
from sglr.engine.kv.row_writes import PendingRowWrites
from sglr.engine.kv.rows import RowAllocator
from sglr.engine.kv.slots import KVSlotAllocator
from sglr.engine.kv.tiers import KVTiers, Load
from sglr.errors import SlotAccountingError


class KVPool:
    def __init__(self, num_slots: int, max_num_reqs: int, use_radix_cache: bool = True) -> None:
        self.free_slots = KVSlotAllocator(num_slots)
        self.free_rows = RowAllocator(max_num_reqs)
        self.index: RadixIndex | NullIndex = RadixIndex() if use_radix_cache else NullIndex()
        self.reuses_kv = use_radix_cache
        self._holders: dict[int, RequestKV] = {}  # by row
        self.tiers: KVTiers | None = None
        self.num_evicted_slots = 0  # cached slots taken back for new work, ever

    @classmethod
    def for_runner(cls, config: Any, runner: Any) -> KVPool:
        """The pool of a model runner's KV cache, with the second tier `config` asks for."""
        pool = cls(
            runner.num_kv_slots,
            runner.runner_config.max_num_reqs,
            use_radix_cache=not config.disable_radix_cache,
        )
        pool.attach_tiers(open_tiers(config, runner))
        return pool

    def attach_tiers(self, tiers: KVTiers | None) -> None:
        """The second KV tier (None: none); the pool closes it (`close`)."""
        if tiers is not None and not self.reuses_kv:
            raise SlotAccountingError("a second KV tier needs the prefix index")
        self.tiers = tiers

    # ----- what the scheduler and the stats read -----

    @property
    def tree(self) -> Any:
        """The radix tree the scheduler matches and locks in (never filled without reuse)."""
        return self.index.tree

    @property
    def num_slots(self) -> int:
        return self.free_slots.num_slots

    @property
    def num_free_slots(self) -> int:
        return self.free_slots.num_free

    @property
    def num_cached_slots(self) -> int:
        return self.index.total_size()

    def stats(self) -> dict[str, float | int]:
        return {
            "num_kv_slots": self.num_slots,
            "num_free_kv_slots": self.num_free_slots,
            "num_cached_kv_slots": self.num_cached_slots,
            "kv_usage": 1.0 - self.num_free_slots / self.num_slots,
            "num_evicted_kv_slots": self.num_evicted_slots,
        } | (self.tiers.stats() if self.tiers is not None else {})

    # ----- the contract -----

    def admit(self, kv: RequestKV, prefix_slots: np.ndarray, locked_node: int | None) -> bool:
        """Gives `kv` a row and the matched, already locked prefix (the lock is now the pool's)."""
        if kv.is_admitted:
            raise SlotAccountingError("admit of a request that already holds KV")
        row = self.free_rows.try_alloc()
        if row is None:
            self.index.unlock(locked_node)
            return False
        prefix_len = int(prefix_slots.size)
        kv.grow_to(prefix_len + 1)
        kv.slots[:prefix_len] = prefix_slots
        kv.row = row
        kv.num_tree_owned = kv.num_computed = kv.num_reserved = prefix_len
        kv.locked_node = locked_node
        kv.stale_cols = None
        self._holders[row] = kv
        return True

    def can_reserve(self, num_tokens: int) -> bool:
        return num_tokens <= self.free_slots.num_free + self.index.evictable_size()

    def reserve(self, kvs: Sequence[RequestKV], counts: Sequence[int]) -> bool:
        """Allocates `counts[i]` slots after `kvs[i]`'s computed ones, for all or (False) none."""
        slots = self._alloc(int(sum(counts)))
        if slots is None:
            return False
        offset = 0
        for kv, count in zip(kvs, counts, strict=True):
            if not kv.is_admitted or kv.num_pending:
                raise SlotAccountingError("reserve for a request without a row or with unwritten slots")
            end = kv.num_reserved + count
            kv.grow_to(end + 1)
            kv.slots[kv.num_reserved : end] = slots[offset : offset + count]
            kv.num_reserved = end
            offset += count
        return True

    def commit(self, kv: RequestKV) -> None:
        """The forward pass wrote the KV of the reserved slots."""
        kv.num_computed = kv.num_reserved

    def commit_path(self, kv: RequestKV, kept: Sequence[int]) -> None:
        """A verify pass wrote every reserved slot; the reserved offsets `kept` (ascending
        in the path's order, 0 = the request's last token) stay, in that order, the rest are
        freed. The device row has only the first of them: the next batch writes the others."""
        pending = kv.pending_slots().copy()
        keep = np.asarray(kept, dtype=np.int64)
        if keep.size < 1 or keep[0] != 0 or keep.max() >= pending.size or np.unique(keep).size != keep.size:
            raise SlotAccountingError(f"commit of draft path {list(kept)} over {pending.size} reserved slots")
        start = kv.num_computed
        dropped = np.ones(pending.size, dtype=bool)
        dropped[keep] = False
        self.free_slots.free(pending[dropped])
        kv.slots[start : start + keep.size] = pending[keep]
        kv.num_computed = kv.num_reserved = start + int(keep.size)
        if keep.size > 1:
            cols = np.arange(start + 1, start + keep.size, dtype=np.int64)
            kv.stale_cols = cols if kv.stale_cols is None else np.union1d(kv.stale_cols, cols)

    def truncate(self, kv: RequestKV, num_computed: int) -> None:
        """Frees the written KV past the first `num_computed` tokens (the request's own only)."""
        if kv.num_pending or not kv.num_tree_owned <= num_computed <= kv.num_computed:
            raise SlotAccountingError(f"truncate to {num_computed} of {kv.num_computed} computed tokens")
        self.free_slots.free(kv.slots[num_computed : kv.num_computed])
        kv.num_computed = kv.num_reserved = num_computed
        if kv.stale_cols is not None:
            kept = kv.stale_cols[kv.stale_cols < num_computed]
            kv.stale_cols = kept if kept.size else None

    def share(self, kv: RequestKV, token_ids: np.ndarray, namespace: str | None) -> None:
        """Indexes the written KV of `token_ids` (`fill_ids[:num_computed]`) now; the request
        switches to the index's slots where the index already had them and frees its copies."""
        if not self.reuses_kv:
            return  # nothing is shared: the request keeps its slots
        if kv.num_pending:
            raise SlotAccountingError("share of a request whose step is still running")
        inserted = self._insert(token_ids, kv.computed_slots(), namespace)
        self.index.lock(inserted.node)
        self.index.unlock(kv.locked_node)
        kv.locked_node = inserted.node
        matched = int(inserted.canonical.size)
        changed = np.flatnonzero(kv.slots[:matched] != inserted.canonical)
        if changed.size:
            # Attention reads KV through the device row, so the row must name the index's slots
            # before a freed copy is handed out again: the next batch rewrites these columns.
            kv.slots[changed] = inserted.canonical[changed]
            kv.stale_cols = changed if kv.stale_cols is None else np.union1d(kv.stale_cols, changed)
        kv.num_tree_owned = matched

    def take_row_writes(self, kvs: Sequence[RequestKV]) -> PendingRowWrites | None:
        """Row entries of `kvs` that changed since their rows were written (see `share`); a
        batch that rewrites whole rows (an extend) may drop them."""
        rows, cols, slots = [], [], []
        for kv in kvs:
            if kv.stale_cols is not None:
                assert kv.row is not None
                rows.append(np.full(kv.stale_cols.size, kv.row, dtype=np.int64))
                cols.append(kv.stale_cols.astype(np.int64))
                slots.append(kv.slots[kv.stale_cols].astype(np.int64))
                kv.stale_cols = None
        if not rows:
            return None
        return PendingRowWrites(np.concatenate(rows), np.concatenate(cols), np.concatenate(slots))

    def release(self, kv: RequestKV, token_ids: np.ndarray, namespace: str | None, keep: bool) -> None:
        """Ends `kv`'s hold. `keep` (finished, retracted): the written KV of `token_ids`
        (`fill_ids[:num_computed]`) goes into the index; else (aborted) back to the free list.
        Reserved slots that were never written are freed either way."""
        if not kv.is_admitted:
            return
        self.free_slots.free(kv.pending_slots())
        if keep:
            self._insert(token_ids, kv.computed_slots(), namespace)
        else:
            self.free_slots.free(kv.slots[kv.num_tree_owned : kv.num_computed])
        self.index.unlock(kv.locked_node)
        assert kv.row is not None
        self.free_rows.free(kv.row)
        del self._holders[kv.row]
        kv.row = kv.locked_node = kv.stale_cols = None
        kv.num_tree_owned = kv.num_computed = kv.num_reserved = 0

    def reset(self) -> None:
        """Drops the whole prefix cache; only while no request holds KV."""
        if self._holders or self.index.protected_size():
            raise SlotAccountingError("reset of the KV pool while requests hold KV or locks")
        self.index.reset()
        self.free_slots.reset()
        if self.tiers is not None:
            self.tiers.reset()

    # ----- the second tier -----

    def prefetch(self, token_ids: np.ndarray, namespace: str | None) -> None:
        """An arriving prompt: start reading the stored pages past its device-cached prefix."""
        if self.tiers is not None:
            slots, _ = self.index.match(token_ids, namespace)
            self.tiers.prefetch(token_ids, namespace, slots)

    def load_prefetched(self) -> int:
        """Puts the pages read so far into the device pool and the index; tokens loaded."""
        if self.tiers is None:
            return 0
        return sum(self._load(load) for load in self.tiers.take_loads())

    def close(self) -> None:
        """Writes what the second tier still owes and stops it."""
        if self.tiers is not None:
            self.tiers.close()
            self.tiers = None

    def check_invariants(self) -> None:
        """Raises `SlotAccountingError` (or the tree's error) when any accounting is off."""
        self.index.check_invariants()
        self.free_rows.check_invariants()
        if self.tiers is not None:
            self.tiers.check_invariants()
        num_held = 0
        for row, kv in self._holders.items():
            if kv.row != row or not 0 <= kv.num_tree_owned <= kv.num_computed <= kv.num_reserved:
                raise SlotAccountingError(f"request KV record of row {row} is inconsistent")
            num_held += kv.num_owned_slots
        total = self.free_slots.num_free + self.index.total_size() + num_held
        if total != self.num_slots:
            raise SlotAccountingError(
                f"slot leak: free {self.free_slots.num_free} + cached {self.index.total_size()} + "
                f"held {num_held} != {self.num_slots}"
            )
        if self.free_rows.num_free + len(self._holders) != self.free_rows.max_num_reqs:
            raise SlotAccountingError(
                f"request rows leaked: {self.free_rows.num_free} free + {len(self._holders)} held "
                f"!= {self.free_rows.max_num_reqs}"
            )

    def _alloc(self, num_tokens: int) -> np.ndarray | None:
        shortfall = num_tokens - self.free_slots.num_free
        if shortfall > 0:
            if shortfall > self.index.evictable_size():
                return None
            evicted = self.index.evict(shortfall)
            if self.tiers is not None:
                self.tiers.on_evict(evicted)  # write_back copies them out before reuse
            self.num_evicted_slots += int(evicted.size)
            self.free_slots.free(evicted)
        return self.free_slots.try_alloc(num_tokens)

    def _insert(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None) -> Inserted:
        inserted = self.index.insert(token_ids, slots, namespace)
        self.free_slots.free(inserted.rejected)
        if self.tiers is not None:
            self.tiers.on_insert(token_ids, inserted.canonical, namespace)
        return inserted

    def _load(self, load: Load) -> int:
        """Extends the device-cached prefix of `load.token_ids` with the loaded pages (none
        when the device prefix meanwhile grew past them, shrank below them, or no room)."""
        device_slots, node = self.index.match(load.token_ids, load.namespace)
        device_len = int(device_slots.size)
        if not load.first_token <= device_len < load.token_ids.size:
            return 0
        self.index.lock(node)  # the prefix being extended must not be evicted for its extension
        try:
            slots = self._alloc(load.token_ids.size - device_len)
        finally:
            self.index.unlock(node)
        if slots is None:
            return 0
        assert self.tiers is not None
        self.tiers.scatter(load, device_len, slots)
        inserted = self.index.insert(load.token_ids, np.concatenate([device_slots, slots]), load.namespace)
        self.free_slots.free(inserted.rejected)
        return int(slots.size)
