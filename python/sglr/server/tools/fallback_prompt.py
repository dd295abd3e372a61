"""The system message that shows tools to a model whose chat template cannot render them; it
asks for Hermes-style `<tool_call>` blocks, which `hermes.py` parses."""

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
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call>'
    )


def with_fallback_prompt(messages: list[dict[str, Any]], tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The messages with the tool prompt added to (or as) the first system message."""
    prompt = fallback_tool_prompt(tools)
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{prompt}"}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]
