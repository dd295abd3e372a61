"""Chat messages -> the prompt: validated, then rendered with the model's chat template (or
the one given with `--chat-template`) and tokenized without adding special tokens again."""

from __future__ import annotations

from typing import Any

from sglr.server.body import json_type
from sglr.server.errors import ApiError

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# Message keys passed through to the template as given (templates for tool use read them).
_PASSTHROUGH_KEYS = ("name", "tool_calls", "tool_call_id")


def normalize_messages(raw: Any) -> list[dict[str, Any]]:
    """Plain `{"role", "content": str}` dicts (text parts joined); 400s point at the message."""
    if not isinstance(raw, list) or not raw:
        raise ApiError.bad_request("messages must be a non-empty array", "messages")
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError.bad_request(f"{where} must be an object, got {json_type(message)}", where)
        role = message.get("role")
        if not isinstance(role, str) or role.lower() not in ROLES:
            raise ApiError.bad_request(
                f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role"
            )
        role = role.lower()
        out: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _content(message.get("content"), role, f"{where}.content"),
        }
        for key in _PASSTHROUGH_KEYS:
            if message.get(key) is not None:
                out[key] = message[key]
        messages.append(out)
    return messages


def _content(content: Any, role: str, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        if role == "assistant":  # an assistant turn that only called tools
            return ""
        raise ApiError.bad_request(f"{where} is required for role {role}", where)
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                raise ApiError.bad_request(f"{where}[{j}] must be an object", f"{where}[{j}]")
            kind = part.get("type")
            if kind != "text":
                raise ApiError.bad_request(
                    f"{where}[{j}].type {kind!r} is not supported: this server serves text-only models",
                    f"{where}[{j}].type",
                )
            if not isinstance(part.get("text"), str):
                raise ApiError.bad_request(f"{where}[{j}].text must be a string", f"{where}[{j}].text")
            texts.append(part["text"])
        return "".join(texts)
    raise ApiError.bad_request(f"{where} must be a string or an array of content parts", where)
