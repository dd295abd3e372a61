"""Which draft tokens a verify pass keeps: the longest path the target model agrees with.

Each row of a request's verify rows (its last token, then its draft nodes) gives the target's
distribution for the token after it, processed as sampling would (logit bias, penalties over the
tokens generated so far plus the path, masks, temperature, top-k / top-p / min-p). From the root:

- greedy: the target's token is the argmax; if a child holds it, that child is accepted and the
  walk goes on from it, else the walk ends. The tokens are exactly those of plain greedy decoding.
- sampled: the children are tried in order; child c is accepted with probability p(c) (a draft
  token is certain, its draft distribution one-hot), otherwise p(c) is set to 0 and p
  renormalized before the next child; when none is accepted the token is drawn from what is left
  of p. Each emitted token is therefore distributed exactly as p, the target's own.

The last token of the walk is always one the target chose (the bonus token), so a pass yields
between 1 and depth + 1 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sglr.engine.speculative.tree import ROOT, DraftTree

_SEED_STRIDE = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class AcceptedPath:
    token_ids: list[int]  # the tokens to emit: accepted drafts, then the bonus token
    nodes: list[int]  # the accepted draft nodes (one fewer than token_ids)
    rows: list[int]  # the verify row whose distribution chose each token


def greedy_path(tree: DraftTree | None, target_ids: np.ndarray) -> AcceptedPath:
    """`target_ids[r]`: the argmax of row r (row 0 the root, row 1 + i draft node i)."""
    node, tokens, nodes, rows = ROOT, [], [], []
    while True:
        row = node + 1
        token_id = int(target_ids[row])
        tokens.append(token_id)
        rows.append(row)
        child = tree.child(node, token_id) if tree is not None else None
        if child is None:
            return AcceptedPath(tokens, nodes, rows)
        nodes.append(child)
        node = child


def sampled_path(tree: DraftTree | None, probs: torch.Tensor, rng: np.random.Generator) -> AcceptedPath:
    """`probs[r]`: the target distribution of row r (normalized)."""
    node, tokens, nodes, rows = ROOT, [], [], []
    while True:
        row = node + 1
        children = tree.children[node + 1] if tree is not None else {}
        p = probs[row].double().cpu().numpy().copy() if children else None  # zeroed as drafts fail
        accepted = None
        for token_id, child in children.items():
            assert p is not None
            total = p.sum()
            if total > 0 and rng.random() * total < p[token_id]:
                accepted = child
                break
            p[token_id] = 0.0
        rows.append(row)
        if accepted is None:
            tokens.append(_draw(probs[row] if p is None else p, rng))
            return AcceptedPath(tokens, nodes, rows)
        tokens.append(tree.token_ids[accepted])  # type: ignore[union-attr]
        nodes.append(accepted)
        node = accepted


def rng_for(seed: int | None, step: int) -> np.random.Generator:
    """A seeded request's draws depend only on (seed, step), as plain sampling's do."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng((seed * _SEED_STRIDE + step) % 2**63)


def _draw(p: torch.Tensor | np.ndarray, rng: np.random.Generator) -> int:
    weights = p.double().cpu().numpy() if isinstance(p, torch.Tensor) else p
    total = weights.sum()
    if not total > 0:  # every token the target allows was a rejected draft: cannot happen in exact arithmetic
        return int(np.argmax(weights))
    cumulative = np.cumsum(weights)
    return int(
        min(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"), weights.size - 1)
    )
