"""uvicorn's httptools protocol with a bound on a request's line and headers: uvicorn's own
keeps every header byte a client sends (16 MB of headers were accepted), so a client could
make it hold as much memory as it likes. Past `MAX_HEADER_BYTES` the request gets a 431 in
sglr's error shape and the connection closes. Import it only where uvicorn is configured."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sglr.errors import HeadersTooLargeError
from sglr.http.errors import as_api_error, error_body
from sglr.http.jsonout import dumps
from sglr.http.request_size import RequestSize
from sglr.limits import MAX_BODY_BYTES


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        # Bodies are bounded per route (`BodyLimitMiddleware`), which reads them as they stream.
        self._size = RequestSize(MAX_BODY_BYTES)
        self._refused: HeadersTooLargeError | None = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._size.reset()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        super().on_header(name, value)

    def _count(self, num_bytes: int) -> None:
        try:
            self._size.add_head(num_bytes)
        except HeadersTooLargeError as refused:
            self._refused = refused  # the parser stops; uvicorn answers through send_400_response
            raise

    def send_400_response(self, msg: str) -> None:
        refused = self._refused
        if refused is None:
            super().send_400_response(msg)
            return
        error = as_api_error(refused)
        body = dumps(error_body(error.status, error.message))
        head = b"HTTP/1.1 %d Request Header Fields Too Large\r\n" % error.status
        head += b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(
            body
        )
        self.transport.write(head + body)
        self.transport.close()
