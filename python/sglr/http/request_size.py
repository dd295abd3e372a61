"""The size limits of one request as its HTTP is parsed (`sglr.limits`): its line and headers
(`HeadersTooLargeError` past `MAX_HEADER_BYTES`), its body (`BodyTooLargeError` past
`max_body_bytes`, refused from its `Content-Length` before a byte of it arrives). Counted from
the parser's callbacks (`httptools`, at `sglr-router`'s front and under `sglr-server`'s
uvicorn), which stop the parse by raising; `refusal` finds the error behind the parser's."""

from __future__ import annotations

from sglr.errors import HeadersTooLargeError, InvalidRequestError
from sglr.http.body_limit import body_too_large, check_declared_length
from sglr.limits import MAX_HEADER_BYTES


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
            raise HeadersTooLargeError(
                f"the request line and headers are over the server's limit of {MAX_HEADER_BYTES} bytes",
                limit="max_header_bytes",
            )

    def check_declared(self, content_length: bytes | None) -> None:
        check_declared_length(content_length, self.max_body_bytes)

    def add_body(self, num_bytes: int) -> None:
        self.body_len += num_bytes
        if self.body_len > self.max_body_bytes:
            raise body_too_large(self.max_body_bytes)


def refusal(parser_error: BaseException) -> InvalidRequestError | None:
    """The refusal a callback raised, behind the parser's error about it (None: none did)."""
    cause = parser_error.__context__
    return cause if isinstance(cause, InvalidRequestError) else None
