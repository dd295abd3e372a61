"""The size limits of one request as its HTTP is parsed (`sglr.limits`): its line and headers
(431 past `MAX_HEADER_BYTES`), its body (413 past `max_body_bytes`, refused from its
`Content-Length` before a byte of it arrives). Counted from the parser's callbacks (`httptools`,
at `sglr-router`'s front and under `sglr-server`'s uvicorn), which stop the parse by raising
`RequestRefused`."""

from __future__ import annotations

from sglr.errors import BodyTooLargeError, InvalidRequestError
from sglr.http.body_limit import body_too_large, check_declared_length
from sglr.limits import MAX_HEADER_BYTES


class RequestRefused(Exception):
    """The request is answered `status` and the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RequestSize:
    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.head_len = 0
        self.body_len = 0

    def reset(self) -> None:
        self.head_len = self.body_len = 0

    def add_head(self, num_bytes: int) -> None:
        self.head_len += num_bytes
        if self.head_len > MAX_HEADER_BYTES:
            raise RequestRefused(
                431, f"the request line and headers are over the server's limit of {MAX_HEADER_BYTES} bytes"
            )

    def check_declared(self, content_length: bytes | None) -> None:
        try:
            check_declared_length(content_length, self.max_body_bytes)
        except InvalidRequestError as exc:
            raise RequestRefused(413 if isinstance(exc, BodyTooLargeError) else 400, exc.message) from None

    def add_body(self, num_bytes: int) -> None:
        self.body_len += num_bytes
        if self.body_len > self.max_body_bytes:
            raise RequestRefused(413, body_too_large(self.max_body_bytes).message)
