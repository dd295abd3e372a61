"""A bounded summary of the prefix cache's radix tree, for observers (the server's dashboard).

The Rust tree picks the nodes holding the most reused KV (`RadixTree.summarize`: subtree tokens x
hits, parents before children, GIL released) and only reads the tree, so a summary never changes
what gets evicted. The result is plain frozen data: it crosses from a worker process to the
front inside a `Reply`, and its size is bounded by `TreeSummaryLimits` whatever the tree holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sglr.errors import InvalidRequestError

# The most a caller may ask for: a page draws a few hundred rectangles at most.
MAX_SUMMARY_NODES = 512
MAX_SUMMARY_DEPTH = 64
MAX_HEAD_TOKENS = 256


@dataclass(frozen=True, slots=True)
class TreeSummaryLimits:
    max_nodes: int = 64
    max_depth: int = 8
    max_head_tokens: int = 32

    def __post_init__(self) -> None:
        for name, value, most in (
            ("max_nodes", self.max_nodes, MAX_SUMMARY_NODES),
            ("max_depth", self.max_depth, MAX_SUMMARY_DEPTH),
            ("max_head_tokens", self.max_head_tokens, MAX_HEAD_TOKENS),
        ):
            if not 0 <= value <= most:
                raise InvalidRequestError(f"{name} must be in [0, {most}], got {value}", param=name)


@dataclass(frozen=True, slots=True)
class PrefixNode:
    """One node: `parent` is its parent's position in `TreeSummary.nodes` (-1 at the top);
    `prefix_len` the tokens from the root to its end; `num_hits` the locks taken through it
    (a request that shares the prefix locks it when admitted and again once its prompt is cached);
    `idle_ticks` tree operations since its last use; `head_token_ids` its edge's first tokens."""

    parent: int
    namespace: str | None
    depth: int
    prefix_len: int
    num_tokens: int
    num_subtree_tokens: int
    num_hits: int
    lock_ref: int
    idle_ticks: int
    head_token_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TreeSummary:
    num_nodes: int  # in the whole tree
    num_cached_tokens: int  # in the whole tree
    nodes: tuple[PrefixNode, ...]  # the chosen ones, parents first

    @classmethod
    def empty(cls) -> TreeSummary:
        return cls(0, 0, ())


def summarize_tree(tree: Any, limits: TreeSummaryLimits) -> TreeSummary:
    """Summarizes `tree` (an `sglr._core.RadixTree`); safe from any thread (the tree locks)."""
    num_nodes, num_tokens, rows = tree.summarize(limits.max_nodes, limits.max_depth, limits.max_head_tokens)
    nodes = tuple(PrefixNode(*row[:9], tuple(row[9])) for row in rows)
    return TreeSummary(num_nodes, num_tokens, nodes)


def merge_summaries(summaries: list[TreeSummary]) -> TreeSummary:
    """Several trees' summaries as one (data-parallel replicas): nodes one summary after another,
    parent positions shifted, totals summed; bounded by the parts' bounds."""
    nodes: list[PrefixNode] = []
    for summary in summaries:
        offset = len(nodes)
        for node in summary.nodes:
            nodes.append(node if node.parent < 0 else replace(node, parent=node.parent + offset))
    return TreeSummary(
        sum(s.num_nodes for s in summaries), sum(s.num_cached_tokens for s in summaries), tuple(nodes)
    )
