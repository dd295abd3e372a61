"""`tools`, `tool_choice` and `parallel_tool_calls` -> a validated `ToolRequest` (400s name the field)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sglr.errors import LimitExceededError
from sglr.http.errors import ApiError
from sglr.limits import MAX_TOOL_SCHEMA_BYTES, MAX_TOOLS

NAMED = "named"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str | None
    parameters: dict[str, Any]
    strict: bool

    def as_template_tool(self) -> dict[str, Any]:
        """The OpenAI shape chat templates expect in `tools=`."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description is not None:
            function["description"] = self.description
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolRequest:
    tools: tuple[ToolSpec, ...]
    choice: str  # "auto" | "none" | "required" | NAMED
    named: str | None
    parallel: bool

    @property
    def active(self) -> bool:
        """Whether tools are shown to the model and its reply is parsed for calls."""
        return bool(self.tools) and self.choice != "none"

    def forced_tools(self) -> tuple[ToolSpec, ...]:
        """The tools a constraint must force a call to (empty when the reply is free)."""
        if not self.active:
            return ()
        if self.choice == NAMED:
            return tuple(t for t in self.tools if t.name == self.named)
        if self.choice == "required":
            return self.tools
        return tuple(t for t in self.tools if t.strict)  # auto: only strict tools; see constraint.py


def read_tool_request(
    body: dict[str, Any], max_tools: int = MAX_TOOLS, max_schema_bytes: int = MAX_TOOL_SCHEMA_BYTES
) -> ToolRequest:
    tools = _tools(body.get("tools"), max_tools, max_schema_bytes)
    choice, named = _choice(body.get("tool_choice"), tools)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise ApiError.bad_request("parallel_tool_calls must be a boolean", "parallel_tool_calls")
    return ToolRequest(tools, choice, named, True if parallel is None else parallel)


def _tools(raw: Any, max_tools: int, max_schema_bytes: int) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ApiError.bad_request("tools must be an array of tool objects", "tools")
    if len(raw) > max_tools:
        raise LimitExceededError(
            f"tools has {len(raw)} tools, over the server's limit of {max_tools}", "tools", "max_tools"
        )
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ApiError.bad_request(f'{where} must be an object with type "function"', f"{where}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise ApiError.bad_request(f"{where}.function must be an object", f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ApiError.bad_request(
                f"{where}.function.name must be a non-empty string of letters, digits, _ and -",
                f"{where}.function.name",
            )
        if any(s.name == name for s in specs):
            raise ApiError.bad_request(f"duplicate tool name {name!r}", f"{where}.function.name")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise ApiError.bad_request(
                f"{where}.function.description must be a string", f"{where}.function.description"
            )
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise ApiError.bad_request(
                f"{where}.function.parameters must be a JSON schema object of type object",
                f"{where}.function.parameters",
            )
        try:
            schema_len = len(json.dumps(parameters).encode())
        except (TypeError, ValueError) as exc:
            raise ApiError.bad_request(
                f"{where}.function.parameters: {exc}", f"{where}.function.parameters"
            ) from exc
        if schema_len > max_schema_bytes:
            raise LimitExceededError(
                f"{where}.function.parameters is {schema_len} bytes as JSON, over the server's limit of "
                f"{max_schema_bytes}",
                f"{where}.function.parameters",
                "max_tool_schema_bytes",
            )
        strict = function.get("strict", False)
        if not isinstance(strict, bool):
            raise ApiError.bad_request(
                f"{where}.function.strict must be a boolean", f"{where}.function.strict"
            )
        specs.append(ToolSpec(name, description, parameters, strict))
    return tuple(specs)


def _choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, str | None]:
    if raw is None:
        return ("auto" if tools else "none"), None
    if raw in ("auto", "none", "required"):
        if raw == "required" and not tools:
            raise ApiError.bad_request('tool_choice "required" needs a non-empty tools array', "tool_choice")
        return raw, None
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        name = raw["function"].get("name")
        if not any(t.name == name for t in tools):
            raise ApiError.bad_request(f"tool_choice names an unknown tool {name!r}", "tool_choice")
        return NAMED, name
    raise ApiError.bad_request(
        'tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}',
        "tool_choice",
    )
