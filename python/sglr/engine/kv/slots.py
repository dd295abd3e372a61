"""`KVSlotAllocator`: the free list of KV-cache slot ids (used only by `KVPool`).

Slot ids index the per-layer K/V tensors of the KV pool (one slot per token). Slot 0 is
reserved as the padding target for padded batches and is never handed out. Everything else
(the radix tree, running requests) only *holds* ids; memory comes from and returns here.
"""

from __future__ import annotations

import numpy as np

from sglr.errors import SlotAccountingError

SLOT_DTYPE = np.int32


class KVSlotAllocator:
    """A stack of free slot ids `1..num_slots` with double-free detection."""

    def __init__(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError(f"num_slots must be >= 1, got {num_slots}")
        self.num_slots = num_slots
        # Popping from the end hands out low ids first, which keeps the hot part of the pool small.
        self._free_stack = np.arange(num_slots, 0, -1, dtype=SLOT_DTYPE)
        self._num_free = num_slots
        self._is_free = np.ones(num_slots + 1, dtype=bool)
        self._is_free[0] = False

    @property
    def num_free(self) -> int:
        return self._num_free

    def can_alloc(self, num_tokens: int) -> bool:
        return num_tokens <= self._num_free

    def try_alloc(self, num_tokens: int) -> np.ndarray | None:
        """Takes `num_tokens` free slots (int32 array), or returns None if too few are free."""
        if num_tokens > self._num_free:
            return None
        start = self._num_free - num_tokens
        # Reversed: the top of the stack holds the lowest ids, so a request gets ascending,
        # often consecutive ids (which the CPU attention reads as a slice of the cache).
        slots = self._free_stack[start : self._num_free][::-1].copy()
        self._num_free = start
        self._is_free[slots] = False
        return slots

    def free(self, slots: np.ndarray) -> None:
        """Returns slots to the pool. Raises `SlotAccountingError` on a double or foreign free."""
        slots = np.asarray(slots, dtype=SLOT_DTYPE)
        if slots.size == 0:
            return
        if slots.min() < 1 or slots.max() > self.num_slots:
            raise SlotAccountingError(f"free of slot ids outside 1..{self.num_slots}")
        if self._is_free[slots].any() or np.unique(slots).size != slots.size:
            raise SlotAccountingError("double free of KV slots")
        self._is_free[slots] = True
        end = self._num_free + slots.size
        self._free_stack[self._num_free : end] = slots[::-1]  # the first freed is allocated first
        self._num_free = end

    def reset(self) -> None:
        """Marks every slot free again (all holders must have dropped their ids)."""
        self.__init__(self.num_slots)
