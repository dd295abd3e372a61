"""`ReasoningTokens` without a model: each "token" decodes to its own characters, so where the
close tag ends is known; the tag may span several tokens, the reasoning may never close, and a
reply may have none."""

from __future__ import annotations

from collections.abc import Sequence

from sglr.server.reasoning.formats import REASONING_FORMATS
from sglr.server.reasoning.tokens import ReasoningTokens, with_reasoning_tokens

PIECES = ["<think>", "ab", "c</", "think", ">", "Hel", "lo"]


def _decode(ids: Sequence[int]) -> str:
    return "".join(PIECES[i] for i in ids)


def _count(fmt_name: str, ids: list[int], in_deltas: bool = False) -> int:
    counter = ReasoningTokens(REASONING_FORMATS[fmt_name], _decode)
    for part in [[i] for i in ids] if in_deltas else [ids]:
        counter.feed(_decode(part), part)
        counter.check_invariants()
    return counter.count()


def test_the_count_ends_at_the_token_that_completes_the_close_tag() -> None:
    ids = list(range(len(PIECES)))
    assert _count("qwen3", ids) == _count("qwen3", ids, in_deltas=True) == 5
    assert _count("deepseek-r1", ids[1:]) == 4  # starts inside the reasoning: no open tag
    assert _count("qwen3", ids[:4]) == 4  # not closed yet: all of it is reasoning
    assert _count("qwen3", [5, 6]) == 0  # no reasoning part


def test_usage_gets_both_spellings() -> None:
    usage = with_reasoning_tokens({"completion_tokens": 7}, 5)
    assert usage == {
        "completion_tokens": 7,
        "reasoning_tokens": 5,
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
