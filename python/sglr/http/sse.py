"""Server-sent events: encoding them, and a response that sends them until the client leaves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from sglr.http.disconnect import ClientDisconnected, run_until_disconnect
from sglr.http.errors import ApiError, error_body
from sglr.http.jsonout import dumps

DONE = b"data: [DONE]\n\n"
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_event(payload: Any) -> bytes:
    """The event for a JSON payload; `bytes` are JSON encoded already."""
    return b"data: " + (payload if isinstance(payload, bytes) else dumps(payload)) + b"\n\n"


def sse_error(error: ApiError) -> bytes:
    """An error inside an event stream (the 200 status has been sent already)."""
    return sse_event(error_body(error.status, error.message, error.param, error.code))


class EventStreamResponse(Response):
    """`text/event-stream` from an async iterator of encoded events, up to the one that ends
    with `data: [DONE]`. The iterator is always closed at the end; a client disconnect cancels
    it mid-way."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.init_headers({**_HEADERS, **(headers or {})})

    async def _send_events(self, send: Send) -> None:
        last = b""
        async for chunk in self.events:
            if chunk.endswith(DONE):
                # Nothing follows `[DONE]`: it leaves with the end of the body, in one write.
                last = chunk
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": last, "more_body": False})

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
