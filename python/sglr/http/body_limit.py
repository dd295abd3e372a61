"""The request body limit on every route (pure ASGI middleware): a body announced larger than
`max_body_bytes` is refused before a byte of it is read, one that turns out larger fails the
read that crosses the limit (`BodyTooLargeError`, answered 413 by the route's error mapping).
A route that never reads its body costs nothing for it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sglr.errors import BodyTooLargeError, InvalidRequestError
from sglr.http.errors import as_api_error, error_response


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            check_declared_length(_header(scope, b"content-length"), self.max_body_bytes)
        except InvalidRequestError as exc:
            error = as_api_error(exc)
            await error_response(error.status, error.message, error.param)(scope, receive, send)
            return
        await self.app(scope, _counting(receive, self.max_body_bytes), send)


def check_declared_length(declared: bytes | str | None, max_body_bytes: int) -> None:
    """A `Content-Length` value: it must be a number, at most `max_body_bytes`."""
    if declared is None:
        return
    try:
        length = int(declared)
    except ValueError:
        raise InvalidRequestError("invalid Content-Length header") from None
    if length < 0:
        raise InvalidRequestError("invalid Content-Length header")
    if length > max_body_bytes:
        raise body_too_large(max_body_bytes)


def body_too_large(max_body_bytes: int) -> BodyTooLargeError:
    return BodyTooLargeError(
        f"request body is larger than the server's limit of {max_body_bytes} bytes", limit="max_body_bytes"
    )


def _counting(receive: Receive, max_body_bytes: int) -> Receive:
    num_bytes = 0

    async def counted() -> Message:
        nonlocal num_bytes
        message = await receive()
        if message["type"] == "http.request":
            num_bytes += len(message.get("body", b""))
            if num_bytes > max_body_bytes:
                raise body_too_large(max_body_bytes)
        return message

    return counted


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None
