"""Hermes / Qwen2.5 calls: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, any
number of them; a block that does not decode to a call stays in the content as written."""

from __future__ import annotations

import json
import re

from sglr.server.tools.calls import ParsedReply, ToolCall, call_from_object, reply

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)


def parse_hermes(text: str) -> ParsedReply:
    texts: list[str] = []
    calls: list[ToolCall] = []
    position = 0
    for match in _BLOCK.finditer(text):
        try:
            call = call_from_object(json.loads(match.group(1)))
        except ValueError:
            call = None
        texts.append(text[position : match.start()] if call else text[position : match.end()])
        if call:
            calls.append(call)
        position = match.end()
    texts.append(text[position:])
    return reply(texts, calls)
