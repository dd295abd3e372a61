"""The regex that forces a valid call when `tool_choice` is "required", a named function, or (on
"auto") when every tool is `strict`: the format's wrapper around each tool's arguments schema,
compiled to a regex by the Rust core; several tools give an alternation, `parallel_tool_calls`
allows one or more calls. Auto with some non-strict tools stays unconstrained (parsed after)."""

from __future__ import annotations

import json

from sglr._core import json_schema_to_regex
from sglr.server.errors import ApiError
from sglr.server.tools.formats import ToolFormat
from sglr.server.tools.request import ToolRequest, ToolSpec

_SPECIAL = set(".^$*+?()[]{}|\\")


def literal(text: str) -> str:
    """`text` escaped for the core's regex dialect (newlines written as `\\n`)."""
    return "".join("\\n" if c == "\n" else ("\\" + c if c in _SPECIAL else c) for c in text)


def forced_call_regex(request: ToolRequest, fmt: ToolFormat) -> str | None:
    forced = request.forced_tools()
    if not forced or (request.choice == "auto" and len(forced) != len(request.tools)):
        return None
    call = "(?:" + "|".join(_call_regex(tool, fmt, request) for tool in forced) + ")"
    calls = f"{call}(?:{literal(fmt.separator)}{call})*" if request.parallel else call
    return literal(fmt.prefix) + calls + literal(fmt.suffix)


def _call_regex(tool: ToolSpec, fmt: ToolFormat, request: ToolRequest) -> str:
    try:
        arguments = json_schema_to_regex(json.dumps(tool.parameters))
    except Exception as exc:  # the core raises ValueError-like errors for schemas it cannot compile
        index = request.tools.index(tool)
        raise ApiError.bad_request(
            f"tool {tool.name!r}: cannot compile its parameters schema: {exc}",
            f"tools[{index}].function.parameters",
        ) from exc
    head = json.dumps({"name": tool.name})[:-1] + f", {json.dumps(fmt.arguments_key)}: "
    return literal(head) + f"(?:{arguments})" + literal("}")
