"""One streamed choice's deltas when tools are shown: text outside calls goes out as `content`
as soon as it cannot be the start of a call marker; each complete call goes out as OpenAI streams
them (a `tool_calls` entry with index, id, type and name and empty arguments, then the
arguments). Hermes blocks are found as they close; the Mistral and Llama 3 formats put calls in
the whole reply, so their replies are held to the end and parsed there."""

from __future__ import annotations

import json
from typing import Any

from sglr.server.tools.calls import ToolCall
from sglr.server.tools.chat import ChatTools
from sglr.server.tools.hermes import CLOSE, OPEN


class ToolCallDeltas:
    def __init__(self, tools: ChatTools) -> None:
        self.tools = tools
        self.incremental = tools.format.prefix.startswith(OPEN)
        self.buffer = ""
        self.num_calls = 0

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.buffer += text
        if not self.incremental:
            return []
        out: list[dict[str, Any]] = []
        while True:
            start = self.buffer.find(OPEN)
            if start < 0:
                keep = _marker_prefix_length(self.buffer, OPEN)
                out += _content(self.buffer[: len(self.buffer) - keep])
                self.buffer = self.buffer[len(self.buffer) - keep :]
                return out
            out += _content(self.buffer[:start])
            self.buffer = self.buffer[start:]
            end = self.buffer.find(CLOSE)
            if end < 0:
                return out
            block = self.buffer[: end + len(CLOSE)]
            self.buffer = self.buffer[end + len(CLOSE) :]
            parsed = self.tools.format.parse(block)
            if parsed.calls:
                out += self._calls(parsed.calls)
            else:
                out += _content(block)

    def finish(self) -> list[dict[str, Any]]:
        """What is held at the end: an unclosed block is text; a whole-reply format is parsed now."""
        rest, self.buffer = self.buffer, ""
        if self.incremental:
            return _content(rest)
        parsed = self.tools.format.parse(rest)
        if not parsed.calls:
            return _content(rest)
        return _content(parsed.content or "") + self._calls(parsed.calls)

    def _calls(self, calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
        out = []
        for call in calls:
            if self.num_calls and not self.tools.request.parallel:
                break  # one call only: the whole response keeps the first too
            entry = call.to_openai()
            head = {**entry, "index": self.num_calls, "function": {"name": call.name, "arguments": ""}}
            out.append({"tool_calls": [head]})
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            out.append({"tool_calls": [{"index": self.num_calls, "function": {"arguments": arguments}}]})
            self.num_calls += 1
        return out


def _content(text: str) -> list[dict[str, Any]]:
    return [{"content": text}] if text else []


def _marker_prefix_length(text: str, marker: str) -> int:
    """The length of the longest end of `text` that starts `marker` (text that must wait)."""
    for length in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0
