"""Server-sent events, and noticing clients that go away.

Both stream and non-stream responses watch the connection while the engine works: when the
client disconnects, the work is cancelled, which closes the `Generation` and aborts its
sequences in the engine (their KV slots are freed at once, not after max_new_tokens).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from sglr.server.errors import ApiError, error_body
from sglr.server.jsonout import dumps

T = TypeVar("T")

DONE = b"data: [DONE]\n\n"
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_event(payload: Any) -> bytes:
    return b"data: " + dumps(payload) + b"\n\n"


def sse_error(error: ApiError) -> bytes:
    """An error inside an event stream (the 200 status has been sent already)."""
    return sse_event(error_body(error.status, error.message, error.param))


class ClientDisconnected(Exception):
    """The client closed the connection before the response was complete."""


async def _wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def run_until_disconnect(receive: Receive, work: Awaitable[T]) -> T:
    """Awaits `work`; raises `ClientDisconnected` (after cancelling it) if the client goes away
    first. The request body must have been read already."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise ClientDisconnected
    return task.result()


class EventStreamResponse(Response):
    """`text/event-stream` from an async iterator of encoded events. The iterator is always
    closed at the end; a client disconnect cancels it mid-way."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.init_headers({**_HEADERS, **(headers or {})})

    async def _send_events(self, send: Send) -> None:
        async for chunk in self.events:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            await run_until_disconnect(receive, self._send_events(send))
        except (ClientDisconnected, OSError):
            pass  # nobody is listening; the generation was aborted when the stream closed
        finally:
            aclose = getattr(self.events, "aclose", None)
            if aclose is not None:
                await aclose()
