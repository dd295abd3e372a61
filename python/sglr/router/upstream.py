"""`sglr-router`'s connections to its workers: HTTP/1.1 over asyncio protocols, kept alive and
reused per worker (`UpstreamPools`), responses parsed by `httptools`.

One `UpstreamConnection` carries one exchange at a time, driven by callbacks (no future or task
per request). `send(...)` writes the request; `on_ready` runs once the response can be judged:
for a buffered response when it is complete, for an event stream at its first body bytes (so a
stream that breaks off before any event can still be retried elsewhere). The rest of a stream
goes straight from the parser's callback to a sink (the client's connection); `on_done` runs
when it ends.

`WorkerBrokeOff` means the worker did not finish the exchange: refused, reset, closed, timed
out or unparseable. `fresh` tells whether nothing at all came back on a connection that had
served requests before: the worker may have closed it as idle just as the request went out,
so one retry on a new connection is safe.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

# Past this many idle connections to one worker, a finished one is closed instead of kept.
MAX_IDLE_PER_WORKER = 256
# Request heads kept per worker (by path and forwarded headers: an API key is one of them).
_MAX_HEADS = 64


class WorkerBrokeOff(Exception):
    def __init__(self, reason: str, *, stale: bool = False) -> None:
        super().__init__(reason)
        # Nothing came back on a reused connection: a new one may well succeed.
        self.stale = stale


# Called with None when the exchange got where it was waiting for, or with why it did not.
Outcome = Callable[["WorkerBrokeOff | None"], None]


@dataclass(frozen=True)
class WorkerAddress:
    host: str
    port: int
    base_path: bytes
    host_header: bytes
    tls: bool

    @classmethod
    def parse(cls, url: str) -> WorkerAddress:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        host = parts.hostname or "127.0.0.1"
        return cls(host, port, parts.path.rstrip("/").encode(), parts.netloc.encode("ascii"), tls)


class UpstreamConnection(asyncio.Protocol):
    def __init__(self, pool: WorkerConnections) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self.num_exchanges = 0
        # The exchange in progress; each callback runs at most once (cleared before it runs).
        self._streaming_wanted = False
        self._on_ready: Outcome | None = None
        self._on_done: Outcome | None = None
        self.status = 0
        self.content_type: bytes | None = None
        self.is_stream = False
        self._received_any = False
        self._complete = False
        self._reusable = False
        self._body: list[bytes] = []
        self._sink: Callable[[bytes], None] | None = None
        self._last_activity = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._reading_paused = False

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        self._received_any = True
        self._last_activity = time.monotonic()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"unparseable response: {exc}")

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost reports the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        if not self._complete:
            reason = f"{type(exc).__name__}: {exc}" if exc else "connection closed"
            self._fail(reason)

    def pause_writing(self) -> None:  # requests are small; nothing to throttle
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks --------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self.content_type = value

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.is_stream = (
            self._streaming_wanted
            and self.status == 200
            and (self.content_type or b"").startswith(b"text/event-stream")
        )

    def on_body(self, body: bytes) -> None:
        if self._sink is not None:
            self._sink(body)
            return
        self._body.append(body)
        if self.is_stream:
            self._report_ready(None)

    def on_message_complete(self) -> None:
        self._complete = True
        self._cancel_timer()
        self._reusable = self._parser.should_keep_alive()
        self._report_ready(None)
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(None)

    # -- exchanges ------------------------------------------------------------------------
    def send(self, request: bytes, *, stream: bool, timeout_s: float | None, on_ready: Outcome) -> None:
        """Writes `request`. `on_ready(None)` runs when the response is complete (`body()`),
        or for an event stream once its first bytes are in (then `relay_to` takes the rest);
        `on_ready(WorkerBrokeOff)` when the worker broke off first (the connection is closed
        then). It runs exactly once, possibly before `send` returns."""
        assert self.transport is not None and self._loop is not None
        self.num_exchanges += 1
        self._streaming_wanted = stream
        self._on_ready, self._on_done = on_ready, None
        self.status, self.content_type, self.is_stream = 0, None, False
        self._received_any = self._complete = self._reusable = False
        self._body, self._sink = [], None
        self._last_activity = time.monotonic()
        if timeout_s is not None:
            self._timer = self._loop.call_later(timeout_s, self._check_timeout, timeout_s)
        if self.closed:
            self._fail("connection closed")
        else:
            self.transport.write(request)

    def body(self) -> bytes:
        body = b"".join(self._body)
        self._body = []
        return body

    def relay_to(self, sink: Callable[[bytes], None], on_done: Outcome) -> None:
        """From now on each body chunk goes to `sink` as it is parsed (what came before
        `on_ready` is in `body()`); `on_done` runs once when the stream ends: None when it is
        complete, else the `WorkerBrokeOff`."""
        self._sink = sink
        if self._complete:
            on_done(None)
        elif self.closed:
            on_done(WorkerBrokeOff("connection closed"))
        else:
            self._on_done = on_done

    def release(self) -> None:
        """The exchange is over: a complete one leaves the connection for the next request to
        this worker; anything else (the client left mid-way) closes it."""
        self._sink = None
        if self._complete and self._reusable and not self.closed:
            # A slow client may have paused reading just as the last chunk came in.
            self.resume_reading()
            self._pool.release(self)
        else:
            self.close()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        self._cancel_timer()
        if not self.closed and self.transport is not None:
            self.closed = True
            self._pool.forget(self)
            # abort, not close: a worker reads a reset at once and stops generating.
            self.transport.abort()

    # -- internals ------------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        stale = not self._received_any and self.num_exchanges > 1
        error = WorkerBrokeOff(reason, stale=stale)
        on_done, self._on_done = self._on_done, None
        # Closed before anyone hears of it: a retry must not find this connection idle.
        self.close()
        self._report_ready(error)
        if on_done is not None:
            on_done(error)

    def _report_ready(self, error: WorkerBrokeOff | None) -> None:
        on_ready, self._on_ready = self._on_ready, None
        if on_ready is not None:
            on_ready(error)

    def _check_timeout(self, timeout_s: float) -> None:
        idle_s = time.monotonic() - self._last_activity
        if idle_s >= timeout_s:
            self._timer = None
            self._fail(f"ReadTimeout: no answer for {timeout_s:g} s")
        else:
            assert self._loop is not None
            self._timer = self._loop.call_later(timeout_s - idle_s, self._check_timeout, timeout_s)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class WorkerConnections:
    """The idle keep-alive connections to one worker, most recently used first out."""

    def __init__(self, url: str, connect_timeout_s: float) -> None:
        self.url = url
        self.address = WorkerAddress.parse(url)
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[UpstreamConnection] = []
        self.num_opened = 0
        self._heads: dict[tuple[bytes, tuple[tuple[bytes, bytes], ...]], bytes] = {}

    def post(self, path: bytes, headers: tuple[tuple[bytes, bytes], ...], body: bytes) -> bytes:
        """The bytes of a POST of `body` to `path` on this worker. Heads are kept by path and
        headers (the same few recur; at most `_MAX_HEADS`, then they start over)."""
        head = self._heads.get((path, headers))
        if head is None:
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            head = self._heads[(path, headers)] = request_head(self.address, b"POST", path, headers)
        return b"%b%d\r\n\r\n%b" % (head, len(body), body)

    def take_idle(self) -> UpstreamConnection | None:
        """The most recently used idle connection, if any (else `open` a new one)."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return None

    def release(self, connection: UpstreamConnection) -> None:
        if len(self._idle) < MAX_IDLE_PER_WORKER:
            self._idle.append(connection)
        else:
            connection.close()

    def forget(self, connection: UpstreamConnection) -> None:
        if connection in self._idle:
            self._idle.remove(connection)

    def close_idle(self) -> None:
        for connection in list(self._idle):
            connection.close()
        self._idle.clear()

    @property
    def num_idle(self) -> int:
        return len(self._idle)

    async def open(self) -> UpstreamConnection:
        """A new connection; raises `WorkerBrokeOff` when it cannot be made."""
        address = self.address
        loop = asyncio.get_running_loop()
        tls = ssl.create_default_context() if address.tls else None
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: UpstreamConnection(self), address.host, address.port, ssl=tls),
                self.connect_timeout_s,
            )
        except (OSError, asyncio.TimeoutError) as exc:
            name = "ConnectTimeout" if isinstance(exc, asyncio.TimeoutError) else "ConnectError"
            raise WorkerBrokeOff(f"{name}: {exc}" if str(exc) else name) from None
        self.num_opened += 1
        return connection


class UpstreamPools:
    """`WorkerConnections` by worker URL, made on first use."""

    def __init__(self, connect_timeout_s: float) -> None:
        self.connect_timeout_s = connect_timeout_s
        self._pools: dict[str, WorkerConnections] = {}

    def get(self, url: str) -> WorkerConnections:
        pool = self._pools.get(url)
        if pool is None:
            pool = self._pools[url] = WorkerConnections(url, self.connect_timeout_s)
        return pool

    def discard(self, url: str) -> None:
        pool = self._pools.pop(url, None)
        if pool is not None:
            pool.close_idle()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close_idle()
        self._pools.clear()


def request_head(address: WorkerAddress, method: bytes, path: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bytes:  # fmt: skip
    """A request's head up to its content-length value, which the caller appends (with the
    blank line and the body)."""
    lines = [method, b" ", address.base_path, path, b" HTTP/1.1\r\nhost: ", address.host_header, b"\r\n"]
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"content-length: ")
    return b"".join(lines)
