"""`ReasoningTokens`: how many of a reply's output tokens are reasoning (`usage.reasoning_tokens`,
chat's `completion_tokens_details.reasoning_tokens`, the Responses API's
`output_tokens_details.reasoning_tokens`). The count is exact: the output tokens up to and
including the one that completes the close tag, found by decoding prefixes of the engine's output
ids (a binary search: a prefix holding the tag makes every longer prefix hold it). A reply whose
reasoning never closes is reasoning throughout; one without a reasoning part has none."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sglr.server.reasoning.formats import ReasoningFormat
from sglr.server.reasoning.split import split_reasoning


class ReasoningTokens:
    """One reply's count, fed its text and output ids whole or delta by delta."""

    def __init__(self, fmt: ReasoningFormat, decode: Callable[[Sequence[int]], str]) -> None:
        """`decode`: output ids to text with special tokens kept (a close tag may be one)."""
        self.fmt = fmt
        self.decode = decode
        self.text = ""
        self.output_ids: list[int] = []
        self._closed_count: int | None = None  # fixed once the close tag is out

    def feed(self, text: str, output_ids: Sequence[int]) -> None:
        self.text += text
        self.output_ids.extend(output_ids)

    def count(self) -> int:
        if self._closed_count is not None:
            return self._closed_count
        reasoning, _ = split_reasoning(self.fmt, self.text)
        if reasoning is None:
            return 0
        tag = self.fmt.close_tag
        if tag not in self.text or tag not in self.decode(self.output_ids):
            return len(self.output_ids)  # still reasoning (or the ids do not show the tag)
        low, high = 1, len(self.output_ids)
        while low < high:  # the shortest prefix that holds the tag
            middle = (low + high) // 2
            if tag in self.decode(self.output_ids[:middle]):
                high = middle
            else:
                low = middle + 1
        self._closed_count = low
        return low

    def check_invariants(self) -> None:
        assert self._closed_count is None or 0 < self._closed_count <= len(self.output_ids)


def with_reasoning_tokens(usage: dict[str, object], num_reasoning_tokens: int) -> dict[str, object]:
    """`usage` with SGLang's `reasoning_tokens` and OpenAI's `completion_tokens_details`."""
    return {
        **usage,
        "reasoning_tokens": num_reasoning_tokens,
        "completion_tokens_details": {"reasoning_tokens": num_reasoning_tokens},
    }
