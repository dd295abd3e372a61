"""One batch line through the route it names: the same handler code a live request runs after
its body is read (`answer_chat`, `answer_completion`, `answer_embeddings`), not HTTP. The line's
body gets the batch's priority (`batch_priority`, the one place it is set) and its answer is
the route's: its status and JSON body, an error as the route would send it."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import Message

from sglr.http.errors import ApiError, as_api_error, error_body
from sglr.server.openai.chat import answer_chat
from sglr.server.openai.completions import answer_completion
from sglr.server.openai.embeddings import answer_embeddings

if TYPE_CHECKING:
    from sglr.server.state import ServerState

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
# Below a live request's priority (none, which SGLang's priority scheduling takes as 0), with
# SGLang's default order (larger values first); `batch_priority` flips it for the other order.
BATCH_PRIORITY = -1


def batch_priority(engine: Any) -> int | None:
    """The priority of a batch's lines; None while the engine does not schedule by priority
    (a priority it would ignore, or refuse with `abort_on_priority_when_disabled`)."""
    config = getattr(engine, "config", None)
    if not getattr(config, "enable_priority_scheduling", False):
        return None
    low_values_first = bool(getattr(config, "schedule_low_priority_values_first", False))
    return -BATCH_PRIORITY if low_values_first else BATCH_PRIORITY


async def _never_disconnects() -> Message:
    # A line has no client to go away: it stops only when its task is cancelled.
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def _line_request(url: str) -> Request:
    scope = {"type": "http", "method": "POST", "path": url, "headers": [], "query_string": b""}
    return Request(scope, _never_disconnects)


class LineExecutor:
    """`await executor(url, body)` -> (status code, JSON body) of one line; None while the server
    shuts down."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def __call__(self, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        if self.state.shutting_down:
            return None
        priority = batch_priority(self.state.engine)
        if priority is not None:
            body = {**body, "priority": priority}
        try:
            if body.get("stream"):
                raise ApiError.bad_request(
                    "stream is not supported in a batch (a line's answer is one response)", "stream"
                )
            if url == "/v1/chat/completions":
                response = await answer_chat(self.state, _line_request(url), body)
            elif url == "/v1/completions":
                response = await answer_completion(self.state, _line_request(url), body)
            else:
                response = await answer_embeddings(self.state, body)
        except Exception as exc:  # the route's error, as it would answer it
            error = as_api_error(exc)
            answer = error.status, error_body(error.status, error.message, error.param, error.code)
        else:
            answer = response.status_code, json.loads(bytes(response.body))
        # A shutdown aborts what still runs after its grace period: such an answer may be cut
        # short, so the line stays pending for the next server.
        return None if self.state.shutting_down else answer
