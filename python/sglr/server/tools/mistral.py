"""Mistral calls: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` after any text; a list
that does not decode to calls leaves the whole reply as content."""

from __future__ import annotations

import json

from sglr.server.tools.calls import ParsedReply, call_from_object, reply

MARKER = "[TOOL_CALLS]"


def parse_mistral(text: str) -> ParsedReply:
    start = text.find(MARKER)
    if start < 0:
        return reply([text], [])
    rest = text[start + len(MARKER) :].lstrip()
    try:
        items, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return reply([text], [])
    items = items if isinstance(items, list) else [items]
    calls = [call_from_object(item) for item in items]
    if not calls or any(call is None for call in calls):
        return reply([text], [])
    return reply([text[:start], rest[end:]], [c for c in calls if c is not None])
