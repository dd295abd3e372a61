"""A Responses request -> the chat request it amounts to (`ChatRequest`: the chat template, the
tool constraint and parsers, the JSON-schema constraint), with errors named as the client sent
them (`max_output_tokens`, `text.format.schema`, `tools[0].name`, `input`).

`instructions` become a leading system message; `previous_response_id` puts the stored
conversation (its input and output items) before `input`. `tools` are function tools in the
Responses shape (`{"type": "function", "name", "description", "parameters", "strict"}`),
`tool_choice` `auto` / `none` / `required` or `{"type": "function", "name"}`, `text.format`
`text` / `json_object` / `json_schema` (name, schema, strict).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from typing import Any

from sglr.errors import InvalidRequestError, LimitExceededError
from sglr.http.errors import ApiError
from sglr.http.request import check_known_fields, get_bool, get_dict, get_str
from sglr.server.openai.chat import ChatRequest
from sglr.server.openai.responses.items import ChatMessages, input_items, stored_item
from sglr.server.openai.responses.store import StoredResponse
from sglr.server.state import ServerState

_FIELDS = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens",
    "temperature", "top_p", "stream", "store", "previous_response_id", "metadata", "reasoning",
    "parallel_tool_calls", "user", "background", "truncation", "include", "service_tier",
    "prompt_cache_key", "safety_identifier",
})  # fmt: skip
# Passed to the chat request as they are.
_SAME_FIELDS = ("model", "temperature", "top_p", "stream", "parallel_tool_calls", "user")
# Chat's names of a field -> the Responses name (first match: a prefix of the param).
_RENAMES = (
    # The chat messages do not line up with the input items: the input as a whole.
    (re.compile(r"^messages(\[\d+\].*)?$"), "input"),
    (re.compile(r"^max_completion_tokens"), "max_output_tokens"),
    (re.compile(r"^response_format\.json_schema"), "text.format"),
    (re.compile(r"^response_format"), "text.format"),
    (re.compile(r"^(tools\[\d+\])\.function"), r"\1"),
    (re.compile(r"^tool_choice\.function"), "tool_choice"),
)
MAX_METADATA_KEYS = 16


def client_param(param: str | None) -> str | None:
    """The Responses name of a field the chat request named."""
    if param is None:
        return None
    for pattern, name in _RENAMES:
        if pattern.match(param):
            return pattern.sub(name, param, count=1)
    return param


class ResponsesRequest:
    """A validated Responses request and the chat request that runs it."""

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        check_known_fields(body, _FIELDS, "the responses request")
        if get_bool(body, "background", False):
            raise ApiError.bad_request("background responses are not supported", "background")
        if body.get("truncation") not in (None, "disabled"):
            raise ApiError.bad_request('truncation must be "disabled" (nothing is truncated)', "truncation")
        if body.get("include"):
            raise ApiError.bad_request("include is not supported (nothing extra can be included)", "include")
        self.body = body
        self.store = bool(get_bool(body, "store", True))
        self.metadata = _metadata(body)
        self.instructions = get_str(body, "instructions")
        self.reasoning = get_dict(body, "reasoning") or {}
        effort = self.reasoning.get("effort")
        if effort is not None and not isinstance(effort, str):
            raise ApiError.bad_request("reasoning.effort must be a string", "reasoning.effort")
        self.previous_response_id = get_str(body, "previous_response_id")
        previous = _previous(state, self.previous_response_id)
        own_items = input_items(body.get("input"))
        messages = ChatMessages(state.settings.max_messages)
        if self.instructions:
            messages.messages.append({"role": "system", "content": self.instructions})
        if previous is not None:
            messages.add(previous.conversation(), "previous_response_id")
        messages.add(own_items, "input")
        # What a response continuing this one starts from (`StoredResponse.conversation`).
        self.conversation_items = [
            *(previous.conversation() if previous else []),
            *(stored_item(item) for item in own_items),
        ]
        self.response_id = f"resp_{uuid.uuid4().hex}"
        chat_body = {name: body[name] for name in _SAME_FIELDS if name in body}
        chat_body.update(messages=messages.messages, rid=self.response_id)
        if body.get("max_output_tokens") is not None:
            chat_body["max_completion_tokens"] = body["max_output_tokens"]
        if effort is not None:
            chat_body["reasoning_effort"] = effort
        if body.get("tools") is not None:
            chat_body["tools"] = _chat_tools(body["tools"])
        if body.get("tool_choice") is not None:
            chat_body["tool_choice"] = _chat_tool_choice(body["tool_choice"])
        response_format = _response_format(get_dict(body, "text"))
        if response_format is not None:
            chat_body["response_format"] = response_format
        try:
            self.chat = ChatRequest(state, chat_body)
        except (InvalidRequestError, ApiError) as exc:
            raise _renamed(exc) from exc
        names = self.chat.names
        sources = {key: client_param(value) or value for key, value in (names.sampling or {}).items()}
        self.chat.names = dataclasses.replace(names, sampling=sources, prompt="input")

    @property
    def stream(self) -> bool:
        return self.chat.stream

    def echo(self) -> dict[str, Any]:
        """The request's own settings, as a Responses object repeats them."""
        body, request = self.body, self.chat.tools.request
        return {
            "instructions": self.instructions,
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": self.metadata,
            "model": self.chat.model,
            "parallel_tool_calls": request.parallel,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": self.reasoning.get("effort"), "summary": None},
            "store": self.store,
            "temperature": body.get("temperature"),
            "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}},
            "tool_choice": body.get("tool_choice") or ("auto" if request.tools else "none"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p"),
            "truncation": "disabled",
            "user": body.get("user"),
            "background": False,
        }


def _renamed(exc: InvalidRequestError | ApiError) -> Exception:
    """The chat request's error, naming the field as the Responses request spells it."""
    param = client_param(exc.param)
    message = exc.message if exc.param is None else exc.message.replace(exc.param, param or "")
    if isinstance(exc, ApiError):
        return ApiError(exc.status, message, param, exc.code)
    if isinstance(exc, LimitExceededError):
        return LimitExceededError(message, param, exc.limit)
    return InvalidRequestError(message, param)


def _previous(state: ServerState, response_id: str | None) -> StoredResponse | None:
    if response_id is None:
        return None
    stored = state.responses.get(response_id)
    if stored is None:
        raise ApiError(404, f"no stored response with id {response_id!r}", "previous_response_id")
    return stored


def _metadata(body: dict[str, Any]) -> dict[str, str]:
    metadata = get_dict(body, "metadata") or {}
    if len(metadata) > MAX_METADATA_KEYS:
        raise ApiError.bad_request(f"metadata has more than {MAX_METADATA_KEYS} keys", "metadata")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise ApiError.bad_request(f"metadata.{key} must be a string", f"metadata.{key}")
    return metadata


def _chat_tools(raw: Any) -> Any:
    """Function tools in the chat shape (anything else is left to the chat request's checks)."""
    if not isinstance(raw, list):
        return raw
    tools = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise ApiError.bad_request(
                f'tools[{i}].type must be "function" (the only tools this server runs), got {kind!r}',
                f"tools[{i}].type",
            )
        function = {
            k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
        }
        tools.append({"type": "function", "function": function})
    return tools


def _chat_tool_choice(raw: Any) -> Any:
    if isinstance(raw, dict) and raw.get("type") == "function" and "function" not in raw:
        return {"type": "function", "function": {"name": raw.get("name")}}
    return raw


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """`text.format` as the chat request's `response_format`."""
    if text is None:
        return None
    unknown = sorted(set(text) - {"format", "verbosity"})
    if unknown:
        raise ApiError.bad_request(f"unknown field `{unknown[0]}` in text", f"text.{unknown[0]}")
    fmt = text.get("format")
    if fmt is not None and not isinstance(fmt, dict):
        raise ApiError.bad_request("text.format must be an object", "text.format")
    if fmt is None or fmt.get("type") != "json_schema":
        return fmt  # text / json_object as they are; another type gets the chat request's 400
    spec = {k: fmt[k] for k in ("name", "description", "strict") if k in fmt}
    if "schema" not in fmt:
        raise ApiError.bad_request("text.format.schema is required", "text.format.schema")
    return {"type": "json_schema", "json_schema": {**spec, "schema": fmt["schema"]}}
