"""The n-gram drafter (`engine/speculative/ngram.py`) and draft trees: what it proposes from a
request's own tokens, its bounds, and invariants after every call."""

from __future__ import annotations

import numpy as np
import pytest

from sglr.engine.speculative.ngram import NgramDrafter
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.errors import InvariantError


def _propose(drafter: NgramDrafter, tokens: list[int], max_nodes: int = 7, max_depth: int = 7, uid: int = 0):
    tree = drafter.propose(uid, np.array(tokens), max_nodes, max_depth)
    drafter.check_invariants()
    if tree is not None:
        tree.check_invariants()
    return tree


def test_a_repeated_span_is_drafted_as_one_chain() -> None:
    drafter = NgramDrafter(1, 8, 4, 64)
    tokens = [10, 11, 12, 13, 14, 15, 16, 99, 10, 11, 12]
    tree = _propose(drafter, tokens)
    assert tree is not None and tree.token_ids == [13, 14, 15, 16, 99, 10, 11]
    assert tree.parents == [ROOT, 0, 1, 2, 3, 4, 5]


def test_the_longest_match_drafts_first_and_ties_share_the_budget() -> None:
    drafter = NgramDrafter(1, 8, 4, 64)
    tree = _propose(drafter, [1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 4, 5, 9], max_nodes=7)
    assert tree is not None and tree.path_tokens(6) == [9, 1, 2, 3, 4, 5, 9]
    ties = _propose(drafter, [7, 1, 8, 1, 9, 1], max_nodes=6, uid=1)
    assert ties is not None
    assert sorted(ties.children[0]) == [8, 9]  # both earlier continuations of "1", breadth first
    assert ties.depths[:2] == [1, 1] and len(ties) == 6  # the first level before any second


def test_nothing_to_copy_drafts_nothing() -> None:
    drafter = NgramDrafter(2, 8, 4, 64)
    assert _propose(drafter, [1, 2, 3, 4, 5]) is None
    assert _propose(drafter, [1, 2, 3, 1, 4], uid=1) is None  # "1" matches, but windows need 2


@pytest.mark.parametrize("max_nodes", [1, 3, 7])
def test_bounds_on_nodes_depth_and_memory(max_nodes: int) -> None:
    drafter = NgramDrafter(1, 4, 3, capacity=5)
    rng = np.random.default_rng(max_nodes)
    tokens = rng.integers(0, 6, 400).tolist()
    for end in range(20, 400, 17):
        tree = _propose(drafter, tokens[:end], max_nodes=max_nodes, max_depth=4)
        if tree is not None:
            assert 1 <= len(tree) <= max_nodes and max(tree.depths) <= 4
    index = drafter._indexes[0]
    assert all(len(ends) <= 5 for ends in index.ends.values())
    drafter.forget(0)
    assert drafter.tracked_uids() == set()


def test_a_shorter_sequence_for_a_known_request_starts_its_index_again() -> None:
    drafter = NgramDrafter(1, 4, 2, 16)
    _propose(drafter, [1, 2, 3, 1, 2, 3, 1])
    tree = _propose(drafter, [5, 6, 5])
    assert tree is not None and tree.token_ids[0] == 6


def test_tree_invariants_catch_corruption() -> None:
    tree = DraftTree.chain([4, 5, 6])
    tree.check_invariants()
    assert tree.path(2) == [0, 1, 2] and tree.path_tokens(2) == [4, 5, 6]
    tree.depths[2] = 1
    with pytest.raises(InvariantError):
        tree.check_invariants()
    other = DraftTree.chain([4, 5])
    other.parents[1] = 1
    with pytest.raises(InvariantError):
        other.check_invariants()
