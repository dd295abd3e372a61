"""What a forward batch is checked against (`BatchLimits`) and the request-table edits a decode
batch may carry besides its own column (`RowWrites`, `RowCopies`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sglr.errors import BatchError


@dataclass(frozen=True)
class BatchLimits:
    """What a runner can accept; batches built with limits are checked against them."""

    vocab_size: int
    num_slots: int  # valid slot ids are 1..num_slots
    max_num_reqs: int  # valid rows are 1..max_num_reqs (+ num_draft_rows)
    max_context_len: int
    num_draft_rows: int = 0

    def check(self, input_ids: np.ndarray, slots: np.ndarray, rows: np.ndarray, seq_lens: np.ndarray) -> None:
        if input_ids.size and (input_ids.min() < 0 or input_ids.max() >= self.vocab_size):
            raise BatchError(f"token id outside the vocabulary 0..{self.vocab_size - 1}")
        if slots.size and (slots.min() < 1 or slots.max() > self.num_slots):
            raise BatchError(f"KV slot outside 1..{self.num_slots}")
        num_rows = self.max_num_reqs + self.num_draft_rows
        if rows.min() < 1 or rows.max() > num_rows:
            raise BatchError(f"request row outside 1..{num_rows}")
        if np.unique(rows).size != rows.size:
            raise BatchError("two requests of one batch share a request row")
        if seq_lens.max() > self.max_context_len:
            raise BatchError(
                f"sequence of {int(seq_lens.max())} tokens exceeds max_context_len {self.max_context_len}"
            )


@dataclass(frozen=True)
class RowWrites:
    """Req-to-token entries to (re)write: `table[rows[i], cols[i]] = slots[i]` (int64 arrays)."""

    rows: np.ndarray
    cols: np.ndarray
    slots: np.ndarray

    def check(self, batch_rows: np.ndarray, seq_lens: np.ndarray, limits: BatchLimits | None) -> None:
        if not self.rows.size == self.cols.size == self.slots.size:
            raise BatchError("row_writes arrays differ in length")
        lens_by_row = dict(zip(batch_rows.tolist(), seq_lens.tolist(), strict=True))
        for row, col in zip(self.rows.tolist(), self.cols.tolist(), strict=True):
            if row not in lens_by_row or not 0 <= col < lens_by_row[row] - 1:
                raise BatchError(f"row write ({row}, {col}) outside the batch's cached positions")
        if limits is not None and (self.slots.min() < 1 or self.slots.max() > limits.num_slots):
            raise BatchError(f"KV slot outside 1..{limits.num_slots}")


@dataclass(frozen=True)
class RowCopies:
    """Req-to-token prefixes to copy after the batch's writes: `table[dst_rows[i], :lens[i]] =
    table[src_rows[i], :lens[i]]` (a verify pass's draft rows start as their request's row)."""

    src_rows: np.ndarray
    dst_rows: np.ndarray
    lens: np.ndarray

    def check(self, batch_rows: np.ndarray, seq_lens: np.ndarray) -> None:
        if not self.src_rows.size == self.dst_rows.size == self.lens.size:
            raise BatchError("row_copies arrays differ in length")
        lens_by_row = dict(zip(batch_rows.tolist(), seq_lens.tolist(), strict=True))
        for src, dst, n in zip(
            self.src_rows.tolist(), self.dst_rows.tolist(), self.lens.tolist(), strict=True
        ):
            if src not in lens_by_row or dst not in lens_by_row or src == dst:
                raise BatchError(f"row copy {src} -> {dst} outside the batch's rows")
            if not 0 <= n < lens_by_row[dst] or n > lens_by_row[src]:
                raise BatchError(f"row copy {src} -> {dst} of {n} entries outside their sequences")
