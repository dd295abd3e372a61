"""A streamed response: the chat stream's chunks (reasoning, content and tool-call deltas, from
`ChatChunks`) as the Responses event sequence, each event with its `sequence_number`.

    response.created, response.in_progress
    per output item: response.output_item.added, then
        reasoning: response.content_part.added, response.reasoning_text.delta..., .done,
                   response.content_part.done
        message:   response.content_part.added, response.output_text.delta..., .done,
                   response.content_part.done
        function call: response.function_call_arguments.delta..., .done
    response.output_item.done
    response.completed (response.incomplete when max_output_tokens or an abort cut it short)

An item is open until another kind of delta starts the next one; the finish closes the last.
The finished response is stored (with `store`) before `response.completed` goes out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglr.server.generation_response import DeltaRenderer
from sglr.server.openai.chat import ChatChunks
from sglr.server.openai.responses.output import (
    function_call_item,
    message_item,
    output_text,
    reasoning_item,
    response_object,
    response_status,
    responses_usage,
)
from sglr.server.openai.responses.request import ResponsesRequest


class _OpenItem:
    def __init__(self, kind: str, index: int, item: dict[str, Any]) -> None:
        self.kind = kind  # "reasoning" | "message" | "function_call"
        self.index = index
        self.item = item
        self.text = ""


class ResponseEvents(DeltaRenderer):
    def __init__(
        self,
        req: ResponsesRequest,
        on_done: Callable[[dict[str, Any]], None],
    ) -> None:
        """`on_done(response)`: called with the finished response (to store it)."""
        self.req = req
        self.chunks = ChatChunks(req.chat)
        self.on_done = on_done
        self.created_at = self.chunks.header["created"]
        self.num_events = 0
        self.output: list[dict[str, Any]] = []
        self.open: _OpenItem | None = None
        self.status = "in_progress"

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.num_events, **fields}
        self.num_events += 1
        return event

    def _response(self, status: str, with_usage: bool) -> dict[str, Any]:
        usage_out = responses_usage(self.chunks.current_usage()) if with_usage else None
        return response_object(self.req, status, list(self.output), usage_out, self.created_at)

    def opening(self) -> list[Any]:
        started = self._response("in_progress", with_usage=False)
        return [
            self._event("response.created", response=started),
            self._event("response.in_progress", response=started),
        ]

    def on_delta(self, delta: dict[str, Any]) -> list[Any]:
        events: list[Any] = []
        for chunk in self.chunks.on_delta(delta):
            for choice in chunk["choices"]:
                events += self._on_choice(choice)
        return events

    def closing(self) -> list[Any]:
        events = self._close()
        if self.status == "in_progress":  # every sequence ends with a finish reason; to be sure
            self.status = "completed"
        response = self._response(self.status, with_usage=True)
        self.on_done(response)
        # OpenAI has no event for a cancelled response: it did not complete.
        kind = "response.completed" if self.status == "completed" else "response.incomplete"
        return [*events, self._event(kind, response=response)]

    def _on_choice(self, choice: dict[str, Any]) -> list[Any]:
        delta, events = choice["delta"], []
        if delta.get("reasoning_content"):
            events += self._text("reasoning", delta["reasoning_content"])
        if delta.get("content"):
            events += self._text("message", delta["content"])
        for call in delta.get("tool_calls") or []:
            events += self._tool_call(call)
        if choice.get("finish_reason") is not None:
            self.status = response_status(choice["finish_reason"])
            events += self._close()
        return events

    def _open(self, kind: str, item: dict[str, Any]) -> list[Any]:
        events = self._close()
        self.open = _OpenItem(kind, len(self.output), item)
        events.append(self._event("response.output_item.added", output_index=self.open.index, item=item))
        if kind != "function_call":
            part = output_text("") if kind == "message" else {"type": "reasoning_text", "text": ""}
            events.append(self._part_event("response.content_part.added", part))
        return events

    def _part_event(self, kind: str, part: dict[str, Any]) -> dict[str, Any]:
        assert self.open is not None
        return self._event(
            kind, item_id=self.open.item["id"], output_index=self.open.index, content_index=0, part=part
        )

    def _text(self, kind: str, text: str) -> list[Any]:
        events = []
        if self.open is None or self.open.kind != kind:
            empty = (
                reasoning_item("", "in_progress")
                if kind == "reasoning"
                else message_item(None, "in_progress")
            )
            events += self._open(kind, empty)
        assert self.open is not None
        self.open.text += text
        fields = {"item_id": self.open.item["id"], "output_index": self.open.index, "content_index": 0}
        if kind == "message":
            events.append(self._event("response.output_text.delta", **fields, delta=text, logprobs=[]))
        else:
            events.append(self._event("response.reasoning_text.delta", **fields, delta=text))
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[Any]:
        function = call.get("function") or {}
        events = []
        if call.get("id"):  # a call's first delta: its id and name
            events += self._open(
                "function_call", function_call_item(call["id"], function["name"], "", "in_progress")
            )
        assert self.open is not None and self.open.kind == "function_call"
        arguments = function.get("arguments") or ""
        if arguments:
            self.open.text += arguments
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=self.open.item["id"],
                    output_index=self.open.index,
                    delta=arguments,
                )
            )
        return events

    def _close(self) -> list[Any]:
        """The events that end the open item (none when no item is open)."""
        if self.open is None:
            return []
        opened, self.open = self.open, None
        done = "completed" if self.status in ("completed", "in_progress") else "incomplete"
        item = opened.item
        fields = {"item_id": item["id"], "output_index": opened.index}
        events = []
        if opened.kind == "function_call":
            item = {**item, "arguments": opened.text, "status": "completed"}
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    **fields,
                    name=item["name"],
                    arguments=opened.text,
                )
            )
        elif opened.kind == "message":
            item = message_item(opened.text, done, item["id"])
            events.append(
                self._event(
                    "response.output_text.done", **fields, content_index=0, text=opened.text, logprobs=[]
                )
            )
            events.append(
                self._event("response.content_part.done", **fields, content_index=0, part=item["content"][0])
            )
        else:
            item = reasoning_item(opened.text, done, item["id"])
            events.append(
                self._event("response.reasoning_text.done", **fields, content_index=0, text=opened.text)
            )
            events.append(
                self._event("response.content_part.done", **fields, content_index=0, part=item["content"][0])
            )
        self.output.append(item)
        events.append(self._event("response.output_item.done", output_index=opened.index, item=item))
        return events
