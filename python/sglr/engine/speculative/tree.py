"""`DraftTree`: one request's draft tokens for a verify pass, as a tree under its last token.

Node `i` holds `token_ids[i]`; its parent is node `parents[i]` (`-1`: the request's last token,
the root, which is not a node). Parents come before their children, siblings hold distinct
tokens, so a path from the root is a token sequence and no two paths spell the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sglr.errors import InvariantError

ROOT = -1


@dataclass
class DraftTree:
    token_ids: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)  # the root's children are at depth 1
    # children[node + 1]: {token: child node} (index 0 is the root's)
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])
    # For a request under a token FSM: the FSM state after each node (its row's mask).
    fsm_states: list[int] | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    def child(self, node: int, token_id: int) -> int | None:
        return self.children[node + 1].get(token_id)

    def add(self, parent: int, token_id: int) -> int:
        """The child of `parent` holding `token_id` (added when missing)."""
        existing = self.children[parent + 1].get(token_id)
        if existing is not None:
            return existing
        node = len(self.token_ids)
        self.token_ids.append(int(token_id))
        self.parents.append(parent)
        self.depths.append(1 if parent == ROOT else self.depths[parent] + 1)
        self.children.append({})
        self.children[parent + 1][int(token_id)] = node
        return node

    def path(self, node: int) -> list[int]:
        """Nodes from the root's child down to `node`."""
        nodes = []
        while node != ROOT:
            nodes.append(node)
            node = self.parents[node]
        return nodes[::-1]

    def path_tokens(self, node: int) -> list[int]:
        return [self.token_ids[n] for n in self.path(node)]

    def constrained(self, fsm: Any, root_state: int) -> DraftTree | None:
        """The nodes `fsm` allows from `root_state` (a forbidden token cuts its subtree), with
        their states; None when none is allowed."""
        kept = DraftTree(fsm_states=[])
        new_ids: dict[int, int] = {ROOT: ROOT}
        for node, (token_id, parent) in enumerate(zip(self.token_ids, self.parents, strict=True)):
            if parent not in new_ids:
                continue
            parent_state = root_state if parent == ROOT else kept.fsm_states[new_ids[parent]]  # type: ignore[index]
            state = fsm.try_advance(parent_state, token_id)
            if state is None:
                continue
            new_ids[node] = kept.add(new_ids[parent], token_id)
            kept.fsm_states.append(state)  # type: ignore[union-attr]
        return kept if len(kept) else None

    @classmethod
    def chain(cls, token_ids: list[int] | np.ndarray) -> DraftTree:
        tree = cls()
        node = ROOT
        for token_id in token_ids:
            node = tree.add(node, int(token_id))
        return tree

    def check_invariants(self) -> None:
        n = len(self.token_ids)
        if not len(self.parents) == len(self.depths) == n or len(self.children) != n + 1:
            raise InvariantError("draft tree arrays differ in length")
        for node, (parent, depth) in enumerate(zip(self.parents, self.depths, strict=True)):
            if not ROOT <= parent < node:
                raise InvariantError(f"draft node {node} has parent {parent} (parents come first)")
            if depth != (1 if parent == ROOT else self.depths[parent] + 1):
                raise InvariantError(f"draft node {node} at depth {depth} under parent {parent}")
            if self.children[parent + 1].get(self.token_ids[node]) != node:
                raise InvariantError(f"draft node {node} missing from its parent's children")
        if sum(len(c) for c in self.children) != n:
            raise InvariantError("draft tree children name nodes twice")
        if self.fsm_states is not None and len(self.fsm_states) != n:
            raise InvariantError("draft tree has FSM states for some nodes only")
