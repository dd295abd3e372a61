"""The Responses object and its output items, made from what the chat path answers: a reasoning
item (when `--reasoning-parser` separated reasoning), a `message` with `output_text`, then a
`function_call` item per tool call.

`usage.output_tokens_details.reasoning_tokens` is chat's exact count (the output tokens up to the
reasoning's close tag, `sglr.server.reasoning.tokens`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from sglr.server.openai.responses.request import ResponsesRequest

_STATUSES = {"stop": "completed", "length": "incomplete", "abort": "cancelled"}


def item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def reasoning_item(text: str, status: str, item: str | None = None) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item or item_id("rs"),
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}] if text or status != "in_progress" else [],
        "status": status,
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(text: str | None, status: str, item: str | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item or item_id("msg"),
        "status": status,
        "role": "assistant",
        "content": [] if text is None else [output_text(text)],
    }


def function_call_item(
    call_id: str, name: str, arguments: str, status: str, item: str | None = None
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item or item_id("fc"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def response_status(finish_reason: str | None) -> str:
    return _STATUSES.get(finish_reason or "stop", "completed")


def response_object(
    req: ResponsesRequest,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    created_at: int | None = None,
) -> dict[str, Any]:
    return {
        "id": req.response_id,
        "object": "response",
        "created_at": created_at if created_at is not None else int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "output": output,
        "usage": usage,
        **req.echo(),
    }


def responses_usage(chat_usage: dict[str, Any]) -> dict[str, Any]:
    """Chat's usage in the Responses names."""
    output_tokens = chat_usage["completion_tokens"]
    num_reasoning_tokens = chat_usage.get("reasoning_tokens", 0)
    return {
        "input_tokens": chat_usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": chat_usage["prompt_tokens_details"]["cached_tokens"]},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": min(num_reasoning_tokens, output_tokens)},
        "total_tokens": chat_usage["total_tokens"],
    }


def whole_response(req: ResponsesRequest, completion: dict[str, Any]) -> dict[str, Any]:
    """The Responses object of a whole chat completion (one choice)."""
    choice = completion["choices"][0]
    message = choice["message"]
    status = response_status(choice["finish_reason"])
    item_status = "completed" if status == "completed" else "incomplete"
    output: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if reasoning:
        output.append(reasoning_item(reasoning, item_status))
    calls = message.get("tool_calls") or []
    if message.get("content") or not calls:
        output.append(message_item(message.get("content") or "", item_status))
    for call in calls:
        function = call["function"]
        output.append(function_call_item(call["id"], function["name"], function["arguments"], "completed"))
    usage = responses_usage(completion["usage"])
    return response_object(req, status, output, usage, completion["created"])
