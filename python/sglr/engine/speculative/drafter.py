"""`Drafter`: what a speculative algorithm provides, whatever it drafts with.

The scheduler loop asks for at most `max_nodes` draft tokens (at most `max_depth` deep) after a
decoding request's tokens; the drafter answers with a `DraftTree` or None (nothing to propose).
It sees every request's tokens through `propose` and hears when a request ends (`forget`), so
per-request state never outlives its request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sglr.engine.speculative.tree import DraftTree


@dataclass(frozen=True)
class DraftAsk:
    """One request's part of a pass: its tokens and how many drafts, how deep, it may have."""

    uid: int
    token_ids: np.ndarray
    max_nodes: int
    max_depth: int


class Drafter(ABC):
    name: str

    def propose_all(self, asks: Sequence[DraftAsk]) -> list[DraftTree | None]:
        """Drafts for every request of a pass (a drafter that runs a model batches them)."""
        return [self.propose(a.uid, a.token_ids, a.max_nodes, a.max_depth) for a in asks]

    @abstractmethod
    def propose(self, uid: int, token_ids: np.ndarray, max_nodes: int, max_depth: int) -> DraftTree | None:
        """Drafts to follow `token_ids` (the request's prompt and output so far)."""

    @abstractmethod
    def forget(self, uid: int) -> None:
        """The request ended (or left the running set): drop what is kept for it."""

    @abstractmethod
    def tracked_uids(self) -> set[int]:
        """The requests it keeps state for (invariant checks)."""

    @abstractmethod
    def check_invariants(self) -> None:
        """Raises `InvariantError` when its state is inconsistent."""
