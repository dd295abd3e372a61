"""Responses input items -> chat messages (what the chat template renders).

`input` is a string (one user message) or a list of items: messages (`type` "message" or none;
a role and a string or content parts `input_text` / `output_text` / `refusal`), `function_call`
items (an assistant turn's tool calls, consecutive ones in one turn) and `function_call_output`
items (tool turns). `reasoning` items are kept in the conversation but not rendered again, as
chat templates drop earlier turns' reasoning. 400s name the item: `input[3].call_id`.
"""

from __future__ import annotations

import uuid
from typing import Any

from sglr.errors import LimitExceededError
from sglr.http.errors import ApiError
from sglr.http.request import json_type
from sglr.server.openai.messages import unicode_text

_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")

ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")


def input_items(raw: Any) -> list[dict[str, Any]]:
    """`input` as a list of items (a string is one user message)."""
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise ApiError.bad_request("input must be a string or a non-empty array of items", "input")
    return raw


_ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def stored_item(item: dict[str, Any]) -> dict[str, Any]:
    """An input item as it is kept and listed: with an `id`, a message's text as a content part."""
    kind = item.get("type", "message")
    out = {**item, "type": kind}
    out.setdefault("id", f"{_ID_PREFIXES[kind]}_{uuid.uuid4().hex}")
    if kind == "message" and isinstance(item.get("content"), str):
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        out["content"] = [{"type": part, "text": item["content"]}]
    if kind in ("message", "function_call", "function_call_output"):
        out.setdefault("status", "completed")
    return out


class ChatMessages:
    """Builds the chat messages of a conversation, one list of items after another."""

    def __init__(self, max_messages: int) -> None:
        self.max_messages = max_messages
        self.messages: list[dict[str, Any]] = []
        self._call_names: dict[str, str] = {}  # call_id -> function name, for tool turns

    def add(self, items: list[Any], where: str) -> None:
        """`where` names the list in errors (`input`, or the previous response's items)."""
        for i, item in enumerate(items):
            self._add(item, f"{where}[{i}]")
        if len(self.messages) > self.max_messages:
            raise LimitExceededError(
                f"the conversation has {len(self.messages)} messages, over the server's limit of "
                f"{self.max_messages}",
                "input",
                "max_messages",
            )

    def _add(self, item: Any, where: str) -> None:
        if not isinstance(item, dict):
            raise ApiError.bad_request(f"{where} must be an object, got {json_type(item)}", where)
        kind = item.get("type", "message")
        if kind == "message":
            self._message(item, where)
        elif kind == "function_call":
            self._function_call(item, where)
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", where)
            message = {"role": "tool", "tool_call_id": call_id, "content": _output(item.get("output"), where)}
            if call_id in self._call_names:
                message["name"] = self._call_names[call_id]
            self.messages.append(message)
        elif kind != "reasoning":
            raise ApiError.bad_request(
                f"{where}.type must be one of {', '.join(ITEM_TYPES)}, got {kind!r}", f"{where}.type"
            )

    def _message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise ApiError.bad_request(
                f"{where}.role must be one of {', '.join(_ROLES)}, got {role!r}", f"{where}.role"
            )
        content = _text(item.get("content"), f"{where}.content")
        self.messages.append({"role": "system" if role == "developer" else role, "content": content})

    def _function_call(self, item: dict[str, Any], where: str) -> None:
        call_id = _string(item, "call_id", where)
        name = _string(item, "name", where)
        arguments = _string(item, "arguments", where)
        self._call_names[call_id] = name
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":  # the same turn's text or calls
            last.setdefault("tool_calls", []).append(call)
        else:
            self.messages.append({"role": "assistant", "content": "", "tool_calls": [call]})


def _string(item: dict[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str) or (name != "arguments" and not value):
        raise ApiError.bad_request(f"{where}.{name} must be a non-empty string", f"{where}.{name}")
    return value


def _output(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _text(value, f"{where}.output")
    raise ApiError.bad_request(
        f"{where}.output must be a string or an array of content parts", f"{where}.output"
    )


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or its text parts joined."""
    if isinstance(content, str):
        return unicode_text(content, where)
    if not isinstance(content, list):
        raise ApiError.bad_request(f"{where} must be a string or an array of content parts", where)
    texts = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise ApiError.bad_request(f"{at} must be an object, got {json_type(part)}", at)
        kind = part.get("type")
        if kind not in _TEXT_PARTS:
            raise ApiError.bad_request(
                f"{at}.type must be one of input_text, output_text, refusal (this server serves text), got {kind!r}",
                f"{at}.type",
            )
        text = part.get("refusal" if kind == "refusal" else "text")
        if not isinstance(text, str):
            raise ApiError.bad_request(f"{at}.text must be a string", f"{at}.text")
        texts.append(unicode_text(text, f"{at}.text"))
    return "".join(texts)
