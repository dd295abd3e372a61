"""`KVManager`: moves KV ownership between requests, the prefix cache and the slot pool.

Rules (DESIGN.md section 3):
- a request's `slots[:num_tree_owned]` belong to the tree and are protected by the request's
  lock on `locked_node`; `slots[num_tree_owned:num_computed]` are the request's own;
- computed KV is handed to the cache at chunk boundaries, after the prompt, and at the end,
  so later requests (and a retracted request's re-admission) reuse it;
- aborts give the request's own slots straight back to the pool.
Invariant (checked by `check`): free + cached + owned by requests == total slots.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from sglr.engine.prefix_cache import PrefixCache
from sglr.engine.request import Req
from sglr.errors import SlotAccountingError
from sglr.model.req_to_token import ReqToTokenTable


class KVManager:
    def __init__(self, cache: PrefixCache, rows: ReqToTokenTable) -> None:
        self.cache = cache
        self.rows = rows

    @property
    def num_free_slots(self) -> int:
        return self.cache.allocator.num_free

    def try_alloc(self, num_tokens: int) -> np.ndarray | None:
        return self.cache.try_alloc(num_tokens)

    def admit(self, req: Req, prefix_slots: np.ndarray, locked_node: int | None) -> bool:
        """Takes a request row and the matched (already locked) prefix. False: no row free
        (the caller puts the request back)."""
        row = self.rows.try_alloc()
        if row is None:
            return False
        req.row = row
        prefix_len = int(prefix_slots.size)
        req.ensure_slot_capacity(req.fill_len + 1)
        req.slots[:prefix_len] = prefix_slots
        req.num_computed = req.num_tree_owned = prefix_len
        req.locked_node = locked_node
        if req.cached_tokens is None:
            req.cached_tokens = min(prefix_len, req.prompt_len)
        return True

    def add_computed(self, req: Req, new_slots: np.ndarray) -> None:
        """Records KV just written for `fill_ids[num_computed : num_computed + len(new_slots)]`."""
        end = req.num_computed + int(new_slots.size)
        req.ensure_slot_capacity(end + 1)
        req.slots[req.num_computed : end] = new_slots
        req.num_computed = end

    def share_progress(self, req: Req) -> None:
        """Hands the computed KV to the cache now and moves the lock to the new node."""
        computed = req.fill_ids()[: req.num_computed]
        shared = self.cache.cache_unfinished(computed, req.computed_slots(), req.spec.namespace)
        if shared is None:
            return
        self.cache.lock(shared.node)
        self.cache.unlock(req.locked_node)
        req.locked_node = shared.node
        changed = np.flatnonzero(req.slots[: shared.matched_len] != shared.slots)
        if changed.size:
            # NOTE: the cache freed our duplicates; attention reads KV through the device row,
            # so the row must name the tree's slots before any freed slot is reused.
            req.slots[changed] = shared.slots[changed]
            self._write_row(req.row, changed, shared.slots[changed])
        req.num_tree_owned = shared.matched_len

    def _write_row(self, row: int, columns: np.ndarray, slots: np.ndarray) -> None:
        table = self.rows.table
        cols = torch.from_numpy(columns.astype(np.int64)).to(table.device)
        table[row, cols] = torch.from_numpy(slots.astype(np.int32)).to(table.device)

    def release(self, req: Req, keep_kv: bool) -> None:
        """Ends the request's hold on KV: its computed KV goes to the cache (`keep_kv`, for a
        finished or retracted request) or back to the pool (an abort); lock and row go."""
        if req.row is None:
            return
        if keep_kv:
            computed = req.fill_ids()[: req.num_computed]
            self.cache.cache(computed, req.computed_slots(), req.spec.namespace)
        else:
            self.cache.allocator.free(req.slots[req.num_tree_owned : req.num_computed])
        self.cache.unlock(req.locked_node)
        self.rows.free(req.row)
        req.row = None
        req.locked_node = None
        req.num_computed = req.num_tree_owned = 0

    def release_unadmitted(self, locked_node: int | None, prefix_slots: np.ndarray) -> None:
        """Undoes an admission the engine could not run (no row): drops the scheduler's lock."""
        self.cache.unlock(locked_node)

    def check(self, active: Iterable[Req]) -> None:
        """Slot accounting across pool, cache and requests; raises `SlotAccountingError`."""
        active = list(active)
        num_owned = sum(req.num_owned_slots for req in active if req.row is not None)
        self.cache.check_invariants(num_slots_held=num_owned)
        rows = [req.row for req in active if req.row is not None]
        if len(set(rows)) != len(rows):
            raise SlotAccountingError("two requests share a request row")
        if self.rows.num_free + len(rows) != self.rows.max_num_reqs:
            raise SlotAccountingError(
                f"request rows leaked: {self.rows.num_free} free + {len(rows)} held != {self.rows.max_num_reqs}"
            )
        self.rows.check_invariants()
