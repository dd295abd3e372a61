"""What rank 0's `KVTiers` tells the other tensor-parallel ranks to do with their own pages.

Under tensor parallelism every rank holds its own KV heads, so every rank stores and loads its
own shard of each page (`tier_follower.py`), while only rank 0, where the scheduler runs, decides
which pages move. Rank 0 sends one of these through the per-step command channel
(`ModelRunner.follow`, recipe kind `KV_TIER_RECIPE`), in the order of the steps' batches, so a
follower copies a page out of its device pool before the next batch may overwrite its slots.
Keys are rank 0's (the file names); each rank checks a page against its own namespace seed.
`FinishReads` and `CheckTier` are followed by a collective: every rank takes part.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KV_TIER_RECIPE = "kv_tier"


@dataclass(frozen=True)
class PageWrite:
    """Copy `slots` (the KV of `token_ids`, one page) out of the device pool and store it."""

    key: str
    namespace: str | None
    token_ids: np.ndarray
    slots: np.ndarray


@dataclass(frozen=True)
class WritePages:
    pages: tuple[PageWrite, ...]


@dataclass(frozen=True)
class StartRead:
    """Read `keys` (pages of `token_pages`, from token `first_token` on) in order, as rank 0's
    read `job_id`."""

    job_id: int
    first_token: int
    namespace: str | None
    keys: tuple[str, ...]
    token_pages: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class FinishReads:
    """Rank 0 took these reads (in order): each rank waits for its own, then the ranks agree on
    the fewest pages any of them read (`min_over_ranks`, one per job), which is what loads.
    Reads a previous `FinishReads` took and no `ScatterPages` used are dropped."""

    job_ids: tuple[int, ...]


@dataclass(frozen=True)
class ScatterPages:
    """Write the KV of read `job_id`'s tokens `[from_token, from_token + slots.size)` into `slots`."""

    job_id: int
    from_token: int
    slots: np.ndarray


@dataclass(frozen=True)
class CheckTier:
    """Each rank checks its store's invariants; the ranks agree (`min_over_ranks`) on all ok."""


TierOp = WritePages | StartRead | FinishReads | ScatterPages | CheckTier
