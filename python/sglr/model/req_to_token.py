"""`ReqToTokenTable`: per running request, the KV slot of each of its tokens, on the device.

Row `r`, column `i` holds the slot of token `i` of the request that owns row `r`. Attention
kernels read a request's KV through its row, so the engine never builds per-step slot lists:
an extend batch writes the request's prefix and new slots into its row, a decode step writes
one slot. Row 0 is reserved for padded batch entries (CUDA graphs) and never handed out.

The engine owns row ids (`alloc` / `free`), as it owns slot ids through `KVSlotAllocator`.
"""

from __future__ import annotations

import torch

from sglr.errors import SlotAccountingError

PADDING_ROW = 0


class ReqToTokenTable:
    def __init__(self, max_num_reqs: int, max_context_len: int, device: torch.device | str) -> None:
        if max_num_reqs < 1 or max_context_len < 1:
            raise ValueError("max_num_reqs and max_context_len must be >= 1")
        self.max_num_reqs = max_num_reqs
        self.max_context_len = max_context_len
        # int32 halves the memory and is what the kernels index with.
        self.table = torch.zeros((max_num_reqs + 1, max_context_len), dtype=torch.int32, device=device)
        self._free_rows = list(range(max_num_reqs, 0, -1))
        self._is_free = [False] + [True] * max_num_reqs

    @property
    def num_free(self) -> int:
        return len(self._free_rows)

    def try_alloc(self) -> int | None:
        """A free row id in `1..max_num_reqs`, or None when every row is taken."""
        if not self._free_rows:
            return None
        row = self._free_rows.pop()
        self._is_free[row] = False
        return row

    def free(self, row: int) -> None:
        """Gives a row back. Raises `SlotAccountingError` on a double or foreign free."""
        if not 1 <= row <= self.max_num_reqs or self._is_free[row]:
            raise SlotAccountingError(f"free of request row {row} that is not allocated")
        self._is_free[row] = True
        self._free_rows.append(row)

    def check_invariants(self) -> None:
        if len(set(self._free_rows)) != len(self._free_rows):
            raise SlotAccountingError("request row free list has duplicates")
        if sum(self._is_free) != len(self._free_rows) or self._is_free[PADDING_ROW]:
            raise SlotAccountingError("request row free flags disagree with the free list")
