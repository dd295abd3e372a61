"""`PendingRowWrites`: request-row entries that still name slots the pool has switched away from.

When `KVPool.share` finds a request's tokens already in the prefix index, the request takes the
index's slots and frees its own copies; the device row (the model runner's request-to-token
table) names the copies until a batch rewrites those entries. The pool reports them in its own
terms (`KVPool.take_row_writes`); the batch executor hands them to the model with the next
decode batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PendingRowWrites:
    """Row `rows[i]`, column `cols[i]` must now name slot `slots[i]` (int64 arrays)."""

    rows: np.ndarray
    cols: np.ndarray
    slots: np.ndarray
