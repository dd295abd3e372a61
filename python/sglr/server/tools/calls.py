"""A parsed tool call and its OpenAI `tool_calls` entry."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass(frozen=True)
class ParsedReply:
    """The model's reply split into text outside calls (None when there is none) and calls."""

    content: str | None
    calls: tuple[ToolCall, ...]


def call_from_object(obj: Any, arguments_key: str = "arguments") -> ToolCall | None:
    """A call from a decoded `{"name": str, <arguments_key>: object}`; None when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get(arguments_key, obj.get("arguments"))
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], arguments)


def reply(texts: list[str], calls: list[ToolCall]) -> ParsedReply:
    content = "".join(texts).strip()
    return ParsedReply(content or None, tuple(calls))
