"""The accepted path of a verify pass (`engine/speculative/acceptance.py`): greedy walks follow
the argmax exactly; sampled walks emit each token with the target's own probability, checked
with chi-square tests over many draws of a small vocabulary (critical values of the chi-square
distribution at p = 0.001, so a correct sampler fails about once in a thousand runs per test:
the seeds are fixed, so a run that passes keeps passing)."""

from __future__ import annotations

import numpy as np
import torch

from sglr.engine.speculative.acceptance import greedy_path, rng_for, sampled_path
from sglr.engine.speculative.tree import ROOT, DraftTree

# chi-square critical values at p = 0.001 by degrees of freedom
CHI2_CRITICAL_0_001 = {5: 20.515, 7: 24.322}
NUM_DRAWS = 20000


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def _tree() -> DraftTree:
    """Root children 3 then 5; under 3 a chain 1, 2; under 5 a child 0."""
    tree = DraftTree()
    three = tree.add(ROOT, 3)
    five = tree.add(ROOT, 5)
    tree.add(tree.add(three, 1), 2)
    tree.add(five, 0)
    tree.check_invariants()
    return tree


def test_greedy_walk_follows_the_argmax_and_ends_with_the_targets_token() -> None:
    tree = _tree()
    # rows: root, node 3, node 5, node 1 (under 3), node 2 (under 1), node 0 (under 5)
    path = greedy_path(tree, np.array([3, 1, 0, 7, 6, 4]))
    assert path.token_ids == [3, 1, 7] and path.nodes == [0, 2] and path.rows == [0, 1, 3]
    path = greedy_path(tree, np.array([5, 1, 0, 7, 6, 4]))
    assert path.token_ids == [5, 0, 4] and path.nodes == [1, 4]
    assert greedy_path(tree, np.array([6, 1, 0, 7, 6, 4])).token_ids == [6]
    assert greedy_path(None, np.array([2])).token_ids == [2]


def test_sampled_tokens_follow_the_target_distribution_at_every_depth() -> None:
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(6, 8, generator=generator) * 1.5, dim=-1).double()
    tree = _tree()
    rng = np.random.default_rng(1)
    first = np.zeros(8)
    second_after_three = np.zeros(8)
    for _ in range(NUM_DRAWS):
        path = sampled_path(tree, probs, rng)
        first[path.token_ids[0]] += 1
        if path.token_ids[0] == 3:
            second_after_three[path.token_ids[1]] += 1
    # the first token ~ the root's row; after 3, the second ~ node 3's row (row 1)
    assert _chi_square(first, probs[0].numpy()) < CHI2_CRITICAL_0_001[7]
    assert second_after_three.sum() > 500
    assert _chi_square(second_after_three, probs[1].numpy()) < CHI2_CRITICAL_0_001[7]


def test_drafts_the_target_rules_out_are_never_accepted() -> None:
    probs = torch.zeros(6, 8, dtype=torch.float64)
    probs[:, 4] = 0.5
    probs[:, 6] = 0.5  # drafts 3 and 5 have probability 0 at the root
    rng = np.random.default_rng(2)
    counts = np.zeros(8)
    for _ in range(4000):
        path = sampled_path(_tree(), probs, rng)
        assert path.nodes == [] and len(path.token_ids) == 1
        counts[path.token_ids[0]] += 1
    assert counts[[0, 1, 2, 3, 5, 7]].sum() == 0 and abs(counts[4] - counts[6]) < 400


def test_a_certain_draft_is_always_accepted() -> None:
    probs = torch.full((6, 8), 1 / 8, dtype=torch.float64)
    probs[0] = 0
    probs[0, 5] = 1.0
    rng = np.random.default_rng(3)
    assert all(sampled_path(_tree(), probs, rng).token_ids[0] == 5 for _ in range(200))


def test_seeded_draws_depend_on_seed_and_step_only() -> None:
    a = [rng_for(7, 3).random() for _ in range(3)]
    b = [rng_for(7, 3).random() for _ in range(3)]
    assert a == b and rng_for(7, 4).random() != a[0]
