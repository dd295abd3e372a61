"""`NgramDrafter`: drafts copied from the request's own prompt and output (no model).

Per request an index maps each token to the positions just after its most recent occurrences
(at most `capacity` per token, so memory per request is bounded by its length). To draft, the
occurrences of the request's last token are scored by how many tokens before them match the
request's last tokens (up to `max_window`); those matching at least `min_window` propose the
tokens that followed them, longest match first, then most recent, at most `max_breadth` of them.
The proposals are merged breadth-first into one tree (the first tokens of every proposal, then
the second ones, ...) until `max_nodes`. Copy-heavy output (quotes, extraction, edits, repeated
turns) matches one long occurrence and drafts a deep chain; free text matches short, ambiguous
n-grams and drafts a shallow, bushy tree, or nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sglr.engine.speculative.drafter import Drafter
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.errors import InvariantError

# Occurrences of the last token scored per draft, most recent first: bounds the work per step on
# long, repetitive contexts.
_MAX_SCORED = 64


@dataclass
class _RequestIndex:
    num_indexed: int = 0  # token positions seen
    ends: dict[int, deque[int]] = field(default_factory=dict)  # token -> positions after it


class NgramDrafter(Drafter):
    name = "NGRAM"

    def __init__(self, min_window: int, max_window: int, max_breadth: int, capacity: int) -> None:
        if not 1 <= min_window <= max_window or max_breadth < 1 or capacity < 1:
            raise ValueError("need 1 <= min_window <= max_window, max_breadth >= 1, capacity >= 1")
        self.min_window = min_window
        self.max_window = max_window
        self.max_breadth = max_breadth
        self.capacity = capacity
        self._indexes: dict[int, _RequestIndex] = {}

    def propose(self, uid: int, token_ids: np.ndarray, max_nodes: int, max_depth: int) -> DraftTree | None:
        if max_nodes < 1 or max_depth < 1 or token_ids.size <= self.min_window:
            return None
        tokens = token_ids.tolist()
        proposals = self._proposals(self._index_for(uid, tokens), tokens, max_depth)
        if not proposals:
            return None
        tree = DraftTree()
        for group in _by_match_length(proposals):
            _merge_breadth_first(tree, group, max_nodes, max_depth)
            if len(tree) >= max_nodes:
                break
        return tree

    def forget(self, uid: int) -> None:
        self._indexes.pop(uid, None)

    def tracked_uids(self) -> set[int]:
        return set(self._indexes)

    def _index_for(self, uid: int, tokens: list[int]) -> _RequestIndex:
        index = self._indexes.get(uid)
        if index is None or index.num_indexed > len(tokens):
            index = self._indexes[uid] = _RequestIndex()
        for end in range(index.num_indexed + 1, len(tokens) + 1):
            ends = index.ends.get(tokens[end - 1])
            if ends is None:
                ends = index.ends[tokens[end - 1]] = deque(maxlen=self.capacity)
            ends.append(end)
        index.num_indexed = len(tokens)
        return index

    def _proposals(
        self, index: _RequestIndex, tokens: list[int], max_depth: int
    ) -> list[tuple[int, list[int]]]:
        """(match length, continuation) of earlier occurrences of the last tokens, best first."""
        last = len(tokens)
        scored = []
        for rank, end in enumerate(reversed(index.ends.get(tokens[-1], ()))):
            if rank > _MAX_SCORED:
                break
            if end >= last:
                continue  # the request's own last token
            match = 1
            while (
                match < self.max_window
                and match < end
                and tokens[end - 1 - match] == tokens[last - 1 - match]
            ):
                match += 1
            if match >= self.min_window:
                scored.append((-match, -end))
        scored.sort()  # longest match, then most recent
        return [
            (-neg, tokens[-neg_end : -neg_end + max_depth]) for neg, neg_end in scored[: self.max_breadth]
        ]

    def check_invariants(self) -> None:
        for uid, index in self._indexes.items():
            for ends in index.ends.values():
                if len(ends) > self.capacity:
                    raise InvariantError(f"n-gram index of request {uid} over its capacity")
                if any(not 1 <= end <= index.num_indexed for end in ends) or list(ends) != sorted(ends):
                    raise InvariantError(f"n-gram index of request {uid} points outside its tokens")
            if not index.ends and index.num_indexed:
                raise InvariantError(f"n-gram index of request {uid} lost its entries")


def _by_match_length(proposals: list[tuple[int, list[int]]]) -> list[list[list[int]]]:
    """Continuations grouped by match length, longest first (their order kept within a group)."""
    groups: list[list[list[int]]] = []
    last_match = None
    for match, continuation in proposals:
        if match != last_match:
            groups.append([])
            last_match = match
        groups[-1].append(continuation)
    return groups


def _merge_breadth_first(tree: DraftTree, proposals: list[list[int]], max_nodes: int, max_depth: int) -> None:
    """Adds the proposals' tokens level by level: a longer match than the rest drafts its whole
    chain before any of theirs; equally good ones share the budget."""
    tips: list[int | None] = [ROOT] * len(proposals)
    for depth in range(max_depth):
        for i, proposal in enumerate(proposals):
            tip = tips[i]
            if tip is None or depth >= len(proposal):
                continue
            if len(tree) >= max_nodes and tree.child(tip, proposal[depth]) is None:
                tips[i] = None
                continue
            tips[i] = tree.add(tip, proposal[depth])
