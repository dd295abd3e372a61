"""For a model whose chat template cannot render tools: a system message that shows them and
asks for Hermes-style `<tool_call>` blocks (which `hermes.py` parses), and a history those
templates can render (assistant `tool_calls` written into the content as the same blocks, `tool`
results as user messages in `<tool_response>` tags, since such templates may not know the
`tool` role or read `tool_calls`)."""

from __future__ import annotations

import json
from typing import Any

from sglr.server.tools.request import ToolSpec


def fallback_tool_prompt(tools: tuple[ToolSpec, ...]) -> str:
    listed = "\n".join(json.dumps(t.as_template_tool(), ensure_ascii=False) for t in tools)
    return (
        "You may call functions. Their signatures:\n"
        f"<tools>\n{listed}\n</tools>\n"
        "To call one, reply with a JSON object inside <tool_call></tool_call> tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call>\n'
        "Results come back inside <tool_response></tool_response> tags."
    )


def with_fallback_prompt(messages: list[dict[str, Any]], tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The messages (tool turns already written as text) with the tool prompt added to (or as)
    the first system message."""
    history = messages
    prompt = fallback_tool_prompt(tools)
    if history and history[0]["role"] == "system":
        return [{**history[0], "content": f"{history[0]['content']}\n\n{prompt}"}, *history[1:]]
    return [{"role": "system", "content": prompt}, *history]


def history_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant `tool_calls` and `tool` results written as text a plain template renders."""
    return [_as_text(message) for message in messages]


def _as_text(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":
        return {"role": "user", "content": f"<tool_response>\n{message['content']}\n</tool_response>"}
    calls = message.get("tool_calls")
    if message["role"] != "assistant" or not calls:
        return message
    blocks = [_call_block(call) for call in calls if isinstance(call, dict)]
    content = "\n".join(p for p in (message["content"], *blocks) if p)
    return {"role": "assistant", "content": content}


def _call_block(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        decoded = arguments  # shown as the string the client sent
    body = json.dumps({"name": function.get("name"), "arguments": decoded}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"
