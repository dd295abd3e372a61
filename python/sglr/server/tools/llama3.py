"""Llama 3.x JSON calls: the reply is `{"name": ..., "parameters": {...}}` (optionally after
`<|python_tag|>`), several separated by `;`. Anything else is plain content."""

from __future__ import annotations

import json

from sglr.server.tools.calls import ParsedReply, ToolCall, call_from_object, reply

PYTHON_TAG = "<|python_tag|>"


def parse_llama3(text: str) -> ParsedReply:
    body = text.strip()
    if body.startswith(PYTHON_TAG):
        body = body[len(PYTHON_TAG) :].lstrip()
    if not body.startswith("{"):
        return reply([text], [])
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    position = 0
    while position < len(body):
        try:
            obj, position = decoder.raw_decode(body, position)
        except ValueError:
            return reply([text], [])
        call = call_from_object(obj, arguments_key="parameters")
        if call is None:
            return reply([text], [])
        calls.append(call)
        while position < len(body) and body[position] in " \t\n;":
            position += 1
    return reply([], calls)
