"""`ReasoningSplitter`: a reply's text, fed in deltas, split into reasoning and content. It never
emits part of a tag: text that may be the start of the close tag (or, before anything is decided,
of the open tag) waits for the next delta. Reasoning always comes before content; leading
whitespace of each part is dropped (templates put newlines after the tags). A whole reply is
split by feeding it once (`split_reasoning`), so streams and whole responses agree."""

from __future__ import annotations

import enum

from sglr.server.reasoning.formats import ReasoningFormat


class _Part(enum.Enum):
    UNDECIDED = "undecided"  # nothing but whitespace (or a prefix of the open tag) seen yet
    REASONING = "reasoning"
    CONTENT = "content"


class ReasoningSplitter:
    def __init__(self, fmt: ReasoningFormat) -> None:
        self.fmt = fmt
        self.part = _Part.UNDECIDED
        self.buffer = ""
        self.saw_reasoning = False  # a reasoning part was entered (maybe empty)
        self._at_part_start = True  # leading whitespace of the current part is still dropped

    @property
    def in_content(self) -> bool:
        """The reasoning (if any) is over: what follows is content."""
        return self.part is _Part.CONTENT

    def feed(self, text: str) -> tuple[str, str]:
        """The reasoning and the content `text` completes (either may be empty)."""
        self.buffer += text
        reasoning, content = "", ""
        while True:
            if self.part is _Part.UNDECIDED:
                if not self._decide():
                    return reasoning, content
            elif self.part is _Part.REASONING:
                self._drop_leading_space()
                end = self.buffer.find(self.fmt.close_tag)
                if end < 0:
                    keep = _tag_prefix_length(self.buffer, self.fmt.close_tag)
                    reasoning += self.buffer[: len(self.buffer) - keep]
                    self.buffer = self.buffer[len(self.buffer) - keep :]
                    return reasoning, content
                reasoning += self.buffer[:end]
                self.buffer = self.buffer[end + len(self.fmt.close_tag) :]
                self._enter(_Part.CONTENT)
            else:
                self._drop_leading_space()
                content += self.buffer
                self.buffer = ""
                return reasoning, content

    def finish(self) -> tuple[str, str]:
        """What is held at the end: an unclosed reasoning part ends with the reply; a lone
        prefix of the open tag is text of the part the reply started in."""
        rest, self.buffer = self.buffer, ""
        if self.part is _Part.UNDECIDED:
            if not rest.strip():
                return "", ""
            self._enter(_Part.REASONING if self.fmt.starts_in_reasoning else _Part.CONTENT)
        if self._at_part_start:
            rest = rest.lstrip()
        return (rest, "") if self.part is _Part.REASONING else ("", rest)

    def _decide(self) -> bool:
        """Leaves UNDECIDED when the buffer shows which part the reply starts in; False while
        it cannot tell yet."""
        head = self.buffer.lstrip()
        if head.startswith(self.fmt.open_tag):
            self.buffer = head[len(self.fmt.open_tag) :]
            self._enter(_Part.REASONING)
            return True
        if not head or self.fmt.open_tag.startswith(head):
            return False
        self._enter(_Part.REASONING if self.fmt.starts_in_reasoning else _Part.CONTENT)
        return True

    def _enter(self, part: _Part) -> None:
        self.part = part
        self._at_part_start = True
        if part is _Part.REASONING:
            self.saw_reasoning = True

    def _drop_leading_space(self) -> None:
        if self._at_part_start:
            self.buffer = self.buffer.lstrip()
            self._at_part_start = not self.buffer


def split_reasoning(fmt: ReasoningFormat, text: str) -> tuple[str | None, str]:
    """A whole reply's reasoning (None when it has no reasoning part) and content."""
    splitter = ReasoningSplitter(fmt)
    reasoning, content = splitter.feed(text)
    more_reasoning, more_content = splitter.finish()
    return (reasoning + more_reasoning if splitter.saw_reasoning else None), content + more_content


def _tag_prefix_length(text: str, tag: str) -> int:
    """The length of the longest end of `text` that starts `tag` (text that must wait)."""
    for length in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0
