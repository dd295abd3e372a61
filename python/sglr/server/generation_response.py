"""Answering with a generation: one JSON response, or a server-sent event stream.

Every generating route ends in one of the two functions below, which own the generation from
then on: they watch for a client that goes away (499, and the generation is aborted), turn
engine aborts into errors (an HTTP status before anything was sent, an error event after), end
streams with `data: [DONE]`, and always close the generation. A route only says how its
responses look: `render` for a whole response, a `DeltaRenderer` for events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.disconnect import ClientDisconnected, run_until_disconnect
from sglr.http.jsonout import JSONOut
from sglr.http.sse import DONE, EventStreamResponse, sse_error, sse_event
from sglr.server.generation import Generation, collect

_CLIENT_CLOSED_REQUEST = 499  # nobody reads it; the status shows in access logs


class DeltaRenderer:
    """How a route shows a generation as events: each method returns the JSON payloads to send
    (objects to encode, or `bytes` of JSON encoded already)."""

    def opening(self) -> list[Any]:
        """Before the first delta."""
        return []

    def on_delta(self, delta: dict[str, Any]) -> list[Any]:
        """For one engine delta (with its sequence `index`) that is not an error."""
        raise NotImplementedError

    def closing(self) -> list[Any]:
        """After the last delta, when every sequence ended without an error."""
        return []


async def json_response(
    request: Request, gen: Generation, render: Callable[[list[dict[str, Any]]], Any]
) -> Response:
    """`render(results)` of every sequence's whole result, in sequence order."""
    try:
        results = await run_until_disconnect(request.receive, collect(gen))
    except ClientDisconnected:
        return Response(status_code=_CLIENT_CLOSED_REQUEST)
    finally:
        await gen.aclose()
    return JSONOut(render(results))


async def stream_response(request: Request, gen: Generation, renderer: DeltaRenderer) -> Response:
    handed_over = False  # the event stream closes the generation from then on
    try:
        # Wait for the first delta: a request the engine refuses outright gets an HTTP error status.
        error = await run_until_disconnect(request.receive, gen.peek_error())
        if error is not None:
            raise error
        handed_over = True
        return EventStreamResponse(_events(gen, renderer))
    except ClientDisconnected:
        return Response(status_code=_CLIENT_CLOSED_REQUEST)
    finally:
        if not handed_over:
            await gen.aclose()


async def _events(gen: Generation, renderer: DeltaRenderer) -> AsyncIterator[bytes]:
    # A client that goes away cancels this generator at a `yield` or an `await`: only `finally`
    # runs then, which aborts the sequences still running.
    try:
        for payload in renderer.opening():
            yield sse_event(payload)
        async for delta in gen:
            error = gen.abort_error(delta)
            if error is not None:
                yield sse_error(error)
                break
            for payload in renderer.on_delta(delta):
                yield sse_event(payload)
        else:
            for payload in renderer.closing():
                yield sse_event(payload)
    except Exception as exc:
        yield sse_error(gen.api_error(exc))
    finally:
        await gen.aclose()
    yield DONE
