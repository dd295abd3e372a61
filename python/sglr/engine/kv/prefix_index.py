"""Prefix indexes: which cached KV slots hold a token sequence. They index ids and free nothing.

`RadixIndex` wraps the Rust radix tree (RadixAttention's reuse); `NullIndex` is the no-reuse
ablation with the same interface (every lookup misses, nothing is kept). Slots an index gives up
(evicted, or duplicates of what it already holds) are returned to the caller, `KVPool`, which
frees them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sglr._core import RadixTree
from sglr.engine.kv.slots import SLOT_DTYPE

_NO_SLOTS = np.zeros(0, dtype=SLOT_DTYPE)


@dataclass(frozen=True)
class Inserted:
    """What `insert` did: the index's slots for the inserted prefix (`canonical`, possibly
    shorter than the input when nothing is kept), the node they end at, and the caller's slots
    that the index did not take (duplicates of slots it already held, or all of them)."""

    canonical: np.ndarray
    node: int | None
    rejected: np.ndarray


class RadixIndex:
    def __init__(self) -> None:
        self.tree = RadixTree()

    def match(self, token_ids: np.ndarray, namespace: str | None) -> tuple[np.ndarray, int | None]:
        """Slots of the longest cached prefix and its node (refreshes LRU; does not lock)."""
        return self.tree.match_prefix(token_ids, namespace)

    def lock(self, node: int | None) -> None:
        if node is not None:
            self.tree.lock(node)

    def unlock(self, node: int | None) -> None:
        if node is not None:
            self.tree.unlock(node)

    def insert(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None) -> Inserted:
        """Indexes `slots` as the KV of `token_ids`. Where a prefix was already cached, the
        index keeps its own slots and rejects the caller's different ones."""
        num_cached = self.tree.insert(token_ids, slots, namespace)
        canonical, node = self.tree.match_prefix(token_ids, namespace)
        # Equal slots at a cached position are the index's own, matched earlier by the caller.
        own = np.asarray(slots[:num_cached], dtype=SLOT_DTYPE)
        return Inserted(canonical, node, own[own != canonical[:num_cached]])

    def evict(self, num_tokens: int) -> np.ndarray:
        """Drops at least `num_tokens` unlocked least-recently-used tokens; returns their slots."""
        return self.tree.evict(num_tokens)

    def evictable_size(self) -> int:
        return self.tree.evictable_size()

    def protected_size(self) -> int:
        return self.tree.protected_size()

    def total_size(self) -> int:
        return self.tree.total_size()

    def reset(self) -> None:
        self.tree.reset()

    def check_invariants(self) -> None:
        self.tree.check_invariants()


class NullIndex:
    """No reuse: never matches, keeps nothing."""

    def __init__(self) -> None:
        # Never filled: cache-aware schedulers see every request as a miss.
        self.tree = RadixTree()

    def match(self, token_ids: np.ndarray, namespace: str | None) -> tuple[np.ndarray, int | None]:
        return _NO_SLOTS, None

    def lock(self, node: int | None) -> None:
        pass

    def unlock(self, node: int | None) -> None:
        pass

    def insert(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None) -> Inserted:
        return Inserted(_NO_SLOTS, None, np.asarray(slots, dtype=SLOT_DTYPE))

    def evict(self, num_tokens: int) -> np.ndarray:
        return _NO_SLOTS

    def evictable_size(self) -> int:
        return 0

    def protected_size(self) -> int:
        return 0

    def total_size(self) -> int:
        return 0

    def reset(self) -> None:
        pass

    def check_invariants(self) -> None:
        self.tree.check_invariants()
