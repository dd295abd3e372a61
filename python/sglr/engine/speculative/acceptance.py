"""Which draft tokens a verify pass keeps: the longest path the target model agrees with.

Each of a request's verify rows (its last token, then its draft nodes) gives the target's
distribution for the token after it, and the target's token there is drawn exactly as plain
decoding draws it (`sglr.model.sampler.sample`: logit bias, penalties over the tokens generated
so far plus the path, masks, then the argmax or, sampling, temperature, top-k / top-p / min-p and
the exponential race, a seeded request's noise fixed by its seed and the row's step). From the
root the walk moves to the child holding the target's token and stops where no child does: the
last token is always the target's own (the bonus token), so a pass yields 1 to depth + 1 tokens.

So every emitted token is drawn from the target's distribution given the tokens before it, each
with noise of its own: greedy output is plain greedy output, sampled output has plain sampling's
distribution, and a seeded request's output is the one it gets without speculation. A draft is
accepted with the probability the target gives it (the one-hot draft distribution of n-gram and
greedy draft-model drafts): the acceptance of the classic rejection scheme, without its
dependence of the draws on the drafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sglr.engine.speculative.tree import ROOT, DraftTree


@dataclass(frozen=True)
class AcceptedPath:
    token_ids: list[int]  # the tokens to emit: accepted drafts, then the bonus token
    nodes: list[int]  # the accepted draft nodes (one fewer than token_ids)
    rows: list[int]  # the verify row whose distribution chose each token


def accepted_path(tree: DraftTree | None, target_ids: Sequence[int]) -> AcceptedPath:
    """`target_ids[r]`: the target's token at row r (row 0 the root, row 1 + i draft node i)."""
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
