"""The optimal prefix-cache hit rate of a set of requests, from their token trie.

With an unbounded cache and the best order, a prompt position needs a prefill only if no
earlier work produced its KV: each distinct prompt prefix is computed once, except prefixes
that some request already produced while decoding (its output, before its last token). The
engine also always computes a request's last prompt token (it needs its logits), which costs
one more token for every request whose whole prompt is already present. This is the bound the
SGLang paper compares against (its Theorem 3.1); a scheduler can only approach it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


class _Node(dict):
    __slots__ = ("decoded",)

    def __init__(self) -> None:
        super().__init__()
        self.decoded = False


def optimal_hit_rate(requests: Sequence[tuple[Sequence[int], Sequence[int]]]) -> float:
    """`requests`: (prompt ids, output ids) pairs. Returns optimal cached / total prompt tokens."""
    root = _Node()
    total = 0
    ends: Counter[int] = Counter()
    end_nodes: dict[int, _Node] = {}
    num_prompt_nodes = 0
    for prompt, _output in requests:
        total += len(prompt)
        node = root
        for token in prompt:
            child = node.get(token)
            if child is None:
                child = node[token] = _Node()
                num_prompt_nodes += 1
            node = child
        ends[id(node)] += 1
        end_nodes[id(node)] = node
    # Mark decode-produced prefixes (output tokens except the last, which has no KV).
    num_decoded_prompt_nodes = 0
    for prompt, output in requests:
        node = root
        for token in prompt:
            node = node[token]
        for token in list(output)[:-1]:
            child = node.get(token)
            if child is None:
                break  # no later prompt continues this way: nothing to count
            if not child.decoded:
                child.decoded = True
                num_decoded_prompt_nodes += 1
            node = child
    min_computed = num_prompt_nodes - num_decoded_prompt_nodes
    for key, count in ends.items():
        min_computed += count if end_nodes[key].decoded else count - 1
    return 1.0 - min_computed / total if total else 0.0
