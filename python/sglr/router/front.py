"""`sglr-router`'s client side: an HTTP/1.1 server on asyncio protocols, requests parsed by
`httptools` (no ASGI, no per-request header dicts).

`ClientConnection` parses requests (keep-alive, pipelined ones answered in order, `Expect:
100-continue`), hands each complete one to `dispatch(connection, request)` and writes what
the handler gives back: a whole response, or a chunked one piece by piece. A handler answers
at once (it returns None), in a coroutine (it returns one; the connection runs it as a task),
or from callbacks (it calls `defer()` before returning None, and `answered()` when its
response is complete): the router's generation path does the last, so a request costs no
task, future or coroutine switch. A request it cannot parse gets a 400 JSON error and the
connection closes. When the client goes, `on_lost` runs (the proxy closes the worker's
connection, so the worker stops generating).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

import httptools

from sglr.http.errors import as_api_error, error_body
from sglr.http.jsonout import dumps
from sglr.http.request_size import RequestSize, refusal
from sglr.limits import MAX_BODY_BYTES

logger = logging.getLogger("sglr.router")

_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_CHUNKED_END = b"0\r\n\r\n"


@dataclass(slots=True)
class ClientRequest:
    method: bytes
    path: bytes
    query: bytes
    # Names lowercased, in the order sent.
    headers: list[tuple[bytes, bytes]]
    body: bytes
    http_version: str
    keep_alive: bool

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


# None: answered already, or deferred (`ClientConnection.defer`); else a coroutine to run.
Dispatch = Callable[["ClientConnection", ClientRequest], Awaitable[None] | None]


class ClientConnection(asyncio.Protocol):
    def __init__(
        self, dispatch: Dispatch, connections: set[ClientConnection], max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self._dispatch = dispatch
        self._connections = connections
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.client: tuple[str, int] | None = None
        self.server: tuple[str, int] | None = None
        self.lost = False
        # Set by a handler while it waits on a worker: run once when the client goes.
        self.on_lost: Callable[[], None] | None = None
        # Set by a relaying handler: the client reads slower than the worker writes.
        self.on_pause_writing: Callable[[], None] | None = None
        self.on_resume_writing: Callable[[], None] | None = None
        self._lost_waiter: asyncio.Future[None] | None = None
        self._queue: deque[ClientRequest] = deque()
        # The request being answered, and its task when its handler is a coroutine.
        self._current: ClientRequest | None = None
        self._task: asyncio.Task[None] | None = None
        self._deferred = False
        self._dispatching = False
        self._closing = False
        # The request being parsed.
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._expect: bytes | None = None
        self._size = RequestSize(max_body_bytes)
        # The response being written.
        self._keep_alive = True
        self._chunked = False
        self._started = False
        self._current_version = "1.1"

    @property
    def busy(self) -> bool:
        return self._current is not None

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        self.client = _address(transport.get_extra_info("peername"))
        self.server = _address(transport.get_extra_info("sockname"))
        self._connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            refused = refusal(exc)  # a limit (request_size.py)
            if refused is not None:
                error = as_api_error(refused)
                self._refuse(error.status, error.message)
            else:
                self._refuse(400, f"malformed HTTP request: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._connections.discard(self)
        self._queue.clear()
        on_lost, self.on_lost = self.on_lost, None
        if on_lost is not None:
            on_lost()
        if self._lost_waiter is not None and not self._lost_waiter.done():
            self._lost_waiter.set_result(None)

    def pause_writing(self) -> None:
        if self.on_pause_writing is not None:
            self.on_pause_writing()

    def resume_writing(self) -> None:
        if self.on_resume_writing is not None:
            self.on_resume_writing()

    # -- httptools callbacks --------------------------------------------------------------
    # No on_message_begin (one callback less per request): the parts of a request are reset
    # as it completes.
    def on_url(self, url: bytes) -> None:
        self._url += url
        self._size.add_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self._headers.append((name, value))
        self._size.add_head(len(name) + len(value))
        if name == b"expect":
            self._expect = value

    def on_headers_complete(self) -> None:
        self._size.check_declared(next((v for k, v in self._headers if k == b"content-length"), None))
        if self._expect is None or self._parser.should_upgrade():
            return  # an upgrade is refused when the parser stops at it (data_received)
        if self._parser.get_http_version() == "1.1" and self._expect.lower() == b"100-continue":
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size.add_body(len(body))
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        if parser.should_upgrade():
            return
        path, _, query = self._url.partition(b"?")
        request = ClientRequest(
            method=parser.get_method(),
            path=path,
            query=query,
            headers=self._headers,
            body=b"".join(self._body),
            http_version=parser.get_http_version(),
            keep_alive=parser.should_keep_alive(),
        )
        self._url, self._headers, self._body, self._expect = b"", [], [], None
        self._size.reset()
        self._queue.append(request)
        if self._current is None:
            self._serve_queue()

    # -- for handlers ---------------------------------------------------------------------
    def defer(self) -> None:
        """The handler answers from callbacks, after it returns: it calls `answered()` once
        its response is complete (or the client left)."""
        self._deferred = True

    def answered(self) -> None:
        """A deferred request's response is complete: the next one queued is served."""
        if not self._deferred:
            return
        self._deferred = False
        if self._dispatching:
            return  # answered before its handler returned: `_serve_queue` goes on
        if self._finish_request():
            self._serve_queue()

    def handler_failed(self, request: ClientRequest) -> None:
        """The handler raised: logged; a 500 if nothing was written yet; the connection closes
        after this request, as nothing reliable can follow a half-written response."""
        logger.exception("request %s %s failed in the router", request.method, request.path)
        self._keep_alive = False
        if not self._started:
            self.respond_error(500, "internal error in the router")

    async def wait_lost(self) -> None:
        if self.lost:
            return
        if self._lost_waiter is None:
            self._lost_waiter = asyncio.get_running_loop().create_future()
        # Shielded: a waiter cancelled when one response ends (Starlette's disconnect listener
        # of a streamed answer) must not cancel the future the connection's next request waits on.
        await asyncio.shield(self._lost_waiter)

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A whole response (content-length set here; the body itself not sent to a HEAD, whose
        client reads none: it would take it for the next response)."""
        parts = self._head_parts(status, headers)
        is_head = self._current is not None and self._current.method == b"HEAD"
        parts += (b"content-length: %d\r\n\r\n" % len(body), b"" if is_head else body)
        self._write(b"".join(parts))

    def respond_error(self, status: int, message: str) -> None:
        self.respond(status, [(b"content-type", b"application/json")], dumps(error_body(status, message)))

    def start_chunked(self, status: int, headers: list[tuple[bytes, bytes]], first: bytes = b"") -> None:
        """A response whose body follows in `write_chunk`s, ended by `end_chunked`."""
        self._chunked = self._http11
        head = self._head(status, headers)
        if self._chunked:
            head += b"transfer-encoding: chunked\r\n"
        else:
            self._keep_alive = False  # an HTTP/1.0 client reads to the end of the connection
        self._write(head + b"\r\n" + self._frame(first))

    def write_chunk(self, data: bytes) -> None:
        if data:
            self._write(self._frame(data))

    def end_chunked(self) -> None:
        if self._chunked:
            self._write(_CHUNKED_END)

    def close(self) -> None:
        self._closing = True
        if self.transport is not None and not self.lost:
            self.transport.close()

    def close_when_idle(self) -> None:
        """Shutdown: close now if no request is in hand, else after its response."""
        self._keep_alive = False
        if self._current is None:
            self.close()

    # -- internals ------------------------------------------------------------------------
    @property
    def _http11(self) -> bool:
        return self._current_version == "1.1"

    def _head(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        return b"".join(self._head_parts(status, headers))

    def _head_parts(self, status: int, headers: list[tuple[bytes, bytes]]) -> list[bytes]:
        parts = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
        for name, value in headers:
            parts += (name, b": ", value, b"\r\n")
        if not self._keep_alive:
            parts.append(b"connection: close\r\n")
        return parts

    def _frame(self, data: bytes) -> bytes:
        if not data or not self._chunked:
            return data
        return b"%x\r\n%b\r\n" % (len(data), data)

    def _write(self, data: bytes) -> None:
        self._started = True
        if not self.lost and self.transport is not None:
            self.transport.write(data)

    def _serve_queue(self) -> None:
        while self._queue and not self.lost:
            request = self._current = self._queue.popleft()
            self._current_version = request.http_version
            self._keep_alive = self._keep_alive and request.keep_alive
            self._chunked = self._started = self._deferred = False
            self._dispatching = True
            try:
                pending = self._dispatch(self, request)
            except Exception:
                self._deferred = False
                self.handler_failed(request)
                pending = None
            finally:
                self._dispatching = False
            if pending is not None:
                self._task = asyncio.get_running_loop().create_task(self._run(request, pending))
                return
            if self._deferred or not self._finish_request():
                return
        self._current = None

    async def _run(self, request: ClientRequest, handler: Awaitable[None]) -> None:
        try:
            await handler
        except Exception:
            self.handler_failed(request)
        finally:
            self._task = None
        if self._finish_request():
            self._serve_queue()

    def _finish_request(self) -> bool:
        """After a response: False when the connection closes (or has gone)."""
        self._current = None
        self.on_lost = self.on_pause_writing = self.on_resume_writing = None
        if not self._keep_alive:
            self.close()
            return False
        return not self.lost

    def _refuse(self, status: int, message: str) -> None:
        self._keep_alive = False
        self._current_version = "1.1"
        if self._current is None:
            self.respond_error(status, message)
        self.close()


def _address(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None
