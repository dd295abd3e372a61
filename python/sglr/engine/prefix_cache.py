"""Prefix caches: where a request's already-computed KV comes from.

`RadixPrefixCache` indexes finished and in-flight sequences in the Rust radix tree so later
requests reuse the KV of their longest cached prefix (RadixAttention). `NullPrefixCache` is
the no-reuse variant used for ablations: same interface, every lookup misses, and finished
sequences give their slots straight back.

Ownership: slots come from and go back to the `KVSlotAllocator`; the tree only holds ids.
A request that uses a matched prefix must `lock` its node until it releases it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sglr._core import RadixTree
from sglr.engine.kv_slots import SLOT_DTYPE, KVSlotAllocator
from sglr.errors import SlotAccountingError

_EMPTY_SLOTS = np.zeros(0, dtype=SLOT_DTYPE)


@dataclass(frozen=True)
class PrefixMatch:
    """The cached part of a token sequence: its KV `slots` and the tree `node` it ends at."""

    slots: np.ndarray
    node: int | None

    @property
    def matched_len(self) -> int:
        return int(self.slots.size)


class PrefixCache(Protocol):
    allocator: KVSlotAllocator
    tree: RadixTree

    def match(self, token_ids: np.ndarray, namespace: str | None = None) -> PrefixMatch: ...
    def lock(self, node: int | None) -> None: ...
    def unlock(self, node: int | None) -> None: ...
    def cache(
        self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None = None
    ) -> PrefixMatch: ...
    def try_alloc(self, num_tokens: int) -> np.ndarray | None: ...
    def evictable_size(self) -> int: ...
    def protected_size(self) -> int: ...
    def reset(self) -> None: ...
    def check_invariants(self, num_slots_held: int) -> None: ...


class RadixPrefixCache:
    """Radix-tree prefix cache over a `KVSlotAllocator`."""

    def __init__(self, allocator: KVSlotAllocator) -> None:
        self.allocator = allocator
        self.tree = RadixTree()

    def match(self, token_ids: np.ndarray, namespace: str | None = None) -> PrefixMatch:
        """Longest cached prefix of `token_ids` (marks it as recently used; does not lock)."""
        slots, node = self.tree.match_prefix(token_ids, namespace)
        return PrefixMatch(slots, node)

    def lock(self, node: int | None) -> None:
        if node is not None:
            self.tree.lock(node)

    def unlock(self, node: int | None) -> None:
        if node is not None:
            self.tree.unlock(node)

    def cache(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None = None) -> PrefixMatch:
        """Hands `slots` (the KV of `token_ids`) to the tree.

        Slots that duplicate an already cached span are freed at once. Returns the canonical
        cached prefix (the tree's slots) so the caller can switch to it; the caller's own
        slots are no longer the caller's after this call.
        """
        num_cached = self.tree.insert(token_ids, slots, namespace)
        canonical, node = self.tree.match_prefix(token_ids, namespace)
        if num_cached:
            # Positions where the caller's slot differs from the tree's are the caller's own
            # recomputed duplicates; equal ones are the tree's slots it matched earlier.
            own = np.asarray(slots[:num_cached], dtype=SLOT_DTYPE)
            self.allocator.free(own[own != canonical[:num_cached]])
        return PrefixMatch(canonical, node)

    def cache_unfinished(
        self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None = None
    ) -> PrefixMatch | None:
        """Shares a running request's computed KV right away (same contract as `cache`), so
        requests arriving meanwhile can reuse it."""
        return self.cache(token_ids, slots, namespace)

    def try_alloc(self, num_tokens: int) -> np.ndarray | None:
        """Allocates slots, evicting least-recently-used cached prefixes if the pool is short."""
        shortfall = num_tokens - self.allocator.num_free
        if shortfall > 0:
            if shortfall > self.tree.evictable_size():
                return None
            self.allocator.free(self.tree.evict(shortfall))
        return self.allocator.try_alloc(num_tokens)

    def evictable_size(self) -> int:
        return self.tree.evictable_size()

    def protected_size(self) -> int:
        return self.tree.protected_size()

    def reset(self) -> None:
        """Drops the whole cache. Only valid when no request holds slots or locks."""
        if self.tree.protected_size():
            raise SlotAccountingError("reset of a prefix cache with locked nodes")
        self.tree.reset()
        self.allocator.reset()

    def check_invariants(self, num_slots_held: int) -> None:
        """free + cached + held-by-requests == total; plus the tree's own invariants."""
        self.tree.check_invariants()
        total = self.allocator.num_free + self.tree.total_size() + num_slots_held
        if total != self.allocator.num_slots:
            raise SlotAccountingError(
                f"slot leak: free {self.allocator.num_free} + cached {self.tree.total_size()} + "
                f"held {num_slots_held} != {self.allocator.num_slots}"
            )


class NullPrefixCache:
    """No reuse: every match is empty and cached sequences are freed immediately."""

    def __init__(self, allocator: KVSlotAllocator) -> None:
        self.allocator = allocator
        # An index that is never filled, so cache-aware schedulers see every request as a miss.
        self.tree = RadixTree()

    def match(self, token_ids: np.ndarray, namespace: str | None = None) -> PrefixMatch:
        return PrefixMatch(_EMPTY_SLOTS, None)

    def lock(self, node: int | None) -> None:
        pass

    def unlock(self, node: int | None) -> None:
        pass

    def cache(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None = None) -> PrefixMatch:
        self.allocator.free(slots)
        return PrefixMatch(_EMPTY_SLOTS, None)

    def cache_unfinished(
        self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None = None
    ) -> PrefixMatch | None:
        return None  # nothing is shared: the request keeps its slots

    def try_alloc(self, num_tokens: int) -> np.ndarray | None:
        return self.allocator.try_alloc(num_tokens)

    def evictable_size(self) -> int:
        return 0

    def protected_size(self) -> int:
        return 0

    def reset(self) -> None:
        self.allocator.reset()

    def check_invariants(self, num_slots_held: int) -> None:
        if self.allocator.num_free + num_slots_held != self.allocator.num_slots:
            raise SlotAccountingError(
                f"slot leak: free {self.allocator.num_free} + held {num_slots_held} != {self.allocator.num_slots}"
            )
