"""`RowAllocator`: ids of the rows of the device's request-to-token table.

A running request owns one row `1..max_num_reqs` (row 0 is the padding row of padded batches and
is never handed out); attention reads the request's KV slots through it. Only ids live here: the
table tensor is the model runner's, written from the batches the engine builds.
"""

from __future__ import annotations

from sglr.errors import SlotAccountingError
from sglr.model.req_to_token import PADDING_ROW


class RowAllocator:
    def __init__(self, max_num_reqs: int) -> None:
        if max_num_reqs < 1:
            raise ValueError(f"max_num_reqs must be >= 1, got {max_num_reqs}")
        self.max_num_reqs = max_num_reqs
        # Popped from the end: low rows first.
        self._free_rows = list(range(max_num_reqs, 0, -1))
        self._is_free = [False] + [True] * max_num_reqs

    @property
    def num_free(self) -> int:
        return len(self._free_rows)

    def try_alloc(self) -> int | None:
        """A free row id, or None when every row is taken."""
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
