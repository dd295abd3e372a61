"""The accepted path of a verify pass (`engine/speculative/acceptance.py`): the walk follows the
target's token at each row through the tree and ends with the target's own token (sampled
output's distribution is tested end to end in `test_speculative_sampling.py`, seeded output
against plain decoding in `test_speculative_engine.py`)."""

from __future__ import annotations

from sglr.engine.speculative.acceptance import accepted_path
from sglr.engine.speculative.tree import ROOT, DraftTree


def _tree() -> DraftTree:
    """Root children 3 then 5; under 3 a chain 1, 2; under 5 a child 0."""
    tree = DraftTree()
    three = tree.add(ROOT, 3)
    five = tree.add(ROOT, 5)
    tree.add(tree.add(three, 1), 2)
    tree.add(five, 0)
    tree.check_invariants()
    return tree


def test_the_walk_follows_the_targets_tokens_and_ends_with_one_of_its_own() -> None:
    tree = _tree()
    # rows: root, node 3, node 5, node 1 (under 3), node 2 (under 1), node 0 (under 5)
    path = accepted_path(tree, ([3, 1, 0, 7, 6, 4]))
    assert path.token_ids == [3, 1, 7] and path.nodes == [0, 2] and path.rows == [0, 1, 3]
    path = accepted_path(tree, ([5, 1, 0, 7, 6, 4]))
    assert path.token_ids == [5, 0, 4] and path.nodes == [1, 4]
    assert accepted_path(tree, ([6, 1, 0, 7, 6, 4])).token_ids == [6]
    assert accepted_path(None, ([2])).token_ids == [2]
