"""A drafter for tests that knows the right answer: it drafts trees that hold the reference
continuation (from a run without speculation) among decoys, so verify passes accept long paths,
reject branches and cut chains, on any model, however random its weights. `FlatCosts` makes the
draft budget's choices independent of how long passes take (every request drafts its most)."""

from __future__ import annotations

import numpy as np

from sglr.engine.speculative.drafter import Drafter
from sglr.engine.speculative.tree import ROOT, DraftTree


class OracleDrafter(Drafter):
    name = "ORACLE"

    def __init__(self, references: list[list[int]], vocab_size: int, wrong_after: int | None = None) -> None:
        """`references`: full token sequences (prompt + reference output). `wrong_after`: the
        chain turns wrong after this many right tokens (None: right to the end)."""
        self.references = references
        self.vocab_size = vocab_size
        self.wrong_after = wrong_after
        self.num_proposed = 0
        self._uids: set[int] = set()

    def propose(self, uid: int, token_ids: np.ndarray, max_nodes: int, max_depth: int) -> DraftTree | None:
        self._uids.add(uid)
        tokens = token_ids.tolist()
        truth = next((ref[len(tokens) :] for ref in self.references if ref[: len(tokens)] == tokens), [])
        tree = DraftTree()
        decoy = lambda t: (t + 1) % self.vocab_size  # noqa: E731
        if not truth:
            tree.add(ROOT, 0)
            return tree
        tree.add(ROOT, decoy(truth[0]))  # a wrong sibling first: the walk must pass it
        node = ROOT
        for depth, token in enumerate(truth[:max_depth]):
            if len(tree) >= max_nodes:
                break
            right = self.wrong_after is None or depth < self.wrong_after
            node = tree.add(node, token if right else decoy(token))
            if depth == 1 and len(tree) < max_nodes:
                tree.add(tree.parents[node], decoy(token))  # a wrong branch off the right path
        self.num_proposed += len(tree)
        return tree

    def forget(self, uid: int) -> None:
        self._uids.discard(uid)

    def tracked_uids(self) -> set[int]:
        return set(self._uids)

    def check_invariants(self) -> None:
        pass


class FlatCosts:
    """Pass costs that never grow with rows, for the budget's `costs`: what it allots then does
    not depend on the machine's timing."""

    def observe(self, num_rows: int, seconds: float) -> None:
        pass

    def estimate(self, num_rows: int) -> float:
        return 1.0
