"""Type stubs for the Rust extension `sglr._core` (hand-written; keep in step with rust/py)."""

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

__version__: str

IdArray: TypeAlias = npt.NDArray[np.int32] | npt.NDArray[np.uint32] | npt.NDArray[np.int64] | Sequence[int]
NodeHandle: TypeAlias = int

class RadixTree:
    """Token-prefix index over KV slot ids (page size 1) with LRU leaf eviction and locks.

    The tree never frees memory: `insert` reports how many leading tokens were already cached
    (the caller frees its duplicate slots) and `evict` returns slot ids for the pool.
    Errors: `sglr.errors.LengthMismatchError`, `UnknownNodeError`, `StaleNodeError`,
    `UnlockError`, `InvariantError`; `TypeError`/`ValueError` for malformed id arrays.
    """

    def __init__(self) -> None: ...
    def match_prefix(
        self, tokens: IdArray, namespace: str | None = None
    ) -> tuple[npt.NDArray[np.int32], NodeHandle]:
        """Slots of the longest cached prefix and the node it ends at (splits an edge if the
        match ends inside it; marks the path as recently used)."""
    def match_prefix_len(self, tokens: IdArray, namespace: str | None = None) -> tuple[int, NodeHandle]: ...
    def insert(self, tokens: IdArray, slots: IdArray, namespace: str | None = None) -> int:
        """Caches `tokens` with KV `slots`; returns the number of leading tokens already cached."""
    def insert_with_node(
        self, tokens: IdArray, slots: IdArray, namespace: str | None = None
    ) -> tuple[int, NodeHandle]: ...
    def match_prefix_batch(
        self, tokens_list: Sequence[IdArray], namespace: str | None = None
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], list[NodeHandle]]:
        """`match_prefix` over many sequences in one call, GIL released: `(slots, offsets,
        nodes)` where sequence `i` matched `slots[offsets[i]:offsets[i + 1]]`."""
    def insert_batch(
        self, tokens_list: Sequence[IdArray], slots_list: Sequence[IdArray], namespace: str | None = None
    ) -> list[int]:
        """`insert` over many sequences in one call, GIL released; stops at the first error."""
    def lock_batch(self, nodes: Sequence[NodeHandle]) -> None:
        """Locks each node; all or nothing."""
    def unlock_batch(self, nodes: Sequence[NodeHandle]) -> None:
        """Unlocks each node; all or nothing."""
    def lock(self, node: NodeHandle) -> None: ...
    def unlock(self, node: NodeHandle) -> None: ...
    def lock_ref(self, node: NodeHandle) -> int: ...
    def evict(self, num_tokens: int) -> npt.NDArray[np.int32]:
        """Frees at least `num_tokens` (or all evictable) tokens, LRU leaves first."""
    def evictable_size(self) -> int: ...
    def protected_size(self) -> int: ...
    def total_size(self) -> int: ...
    def num_nodes(self) -> int: ...
    def reset(self) -> None: ...
    def check_invariants(self) -> None: ...
    def dump(self, namespace: str | None = None) -> list[tuple[int, list[int], list[int], int]]:
        """Depth-first `(depth, tokens, slots, lock_ref)` rows, children by first token."""
