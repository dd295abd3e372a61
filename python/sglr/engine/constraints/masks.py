"""Token bitmask buffers: one int32 row of `ceil(V / 32)` words per request, bit t of word
t // 32 set when token t is allowed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from sglr._core import TokenFsm, fill_bitmasks


def allocate_token_bitmask(num_rows: int, vocab_size: int) -> npt.NDArray[np.int32]:
    """A zeroed `[num_rows, ceil(vocab_size / 32)]` int32 bitmask (C-contiguous).

    `vocab_size` may be the model's (padded) logits width: words past the tokenizer's
    vocabulary are written as zeros by the fill.
    """
    if num_rows < 0 or vocab_size <= 0:
        raise ValueError(f"need num_rows >= 0 and vocab_size > 0, got {num_rows}, {vocab_size}")
    return np.zeros((num_rows, (vocab_size + 31) // 32), dtype=np.int32)


def fill_token_bitmasks(
    fsms: Sequence[TokenFsm],
    states: Sequence[int] | npt.NDArray[np.integer],
    out: npt.NDArray[np.int32],
    rows: Sequence[int] | None = None,
) -> None:
    """Writes the mask of `fsms[i]` in `states[i]` into row `rows[i]` (default `i`) of `out`.

    One call per decode step for the whole batch; the GIL is released while filling. Rows not
    named are left untouched. Raises `sglr.errors.UnknownStateError`, `BitmaskShapeError`,
    `VocabularyError` before writing anything if an input is bad.
    """
    fill_bitmasks(fsms, states, out, rows)


def allowed_token_ids_from_bitmask(row: npt.NDArray[np.int32], vocab_size: int) -> npt.NDArray[np.int64]:
    """Token ids whose bit is set in one bitmask row (for tests and debugging)."""
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)
