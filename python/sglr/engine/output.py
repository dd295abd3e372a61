"""Where the scheduler's `TokenOutput`s go: one sink per sequence, read on the caller's side.

The loop thread pushes; the caller's thread (`QueueSink`) or asyncio loop (`AsyncQueueSink`,
into an `AsyncInbox`) reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections import deque
from typing import Protocol

from sglr.engine.token_output import TokenOutput


class OutputSink(Protocol):
    def push(self, out: TokenOutput) -> None: ...


class QueueSink:
    """For synchronous callers: outputs land in a thread-safe queue."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[TokenOutput] = queue.SimpleQueue()

    def push(self, out: TokenOutput) -> None:
        self.queue.put(out)

    def get(self, timeout: float | None = None) -> TokenOutput:
        return self.queue.get(timeout=timeout)

    def get_nowait(self) -> TokenOutput | None:
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            return None


class AsyncInbox:
    """The outputs of one asyncio call's sequences, each tagged with its sequence's index: put on
    the event loop's thread, taken all at once by the one coroutine that reads them.

    NOTE: lighter than an `asyncio.Queue` (no size limit, task counting or getter queue to keep
    up), which cost a streamed token measurably on a busy front."""

    def __init__(self) -> None:
        self._items: deque[tuple[int, TokenOutput]] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: tuple[int, TokenOutput]) -> None:
        self._items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def take_all(self) -> list[tuple[int, TokenOutput]]:
        """Everything that has arrived, in order; waits for at least one."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items = list(self._items)
        self._items.clear()
        return items


class AsyncQueueSink:
    """For asyncio callers: outputs are handed to the caller's event loop thread-safely, into
    an inbox shared by the sequences of one call (each output tagged with its `index`), so the
    reader waits on one inbox instead of one task per sequence."""

    def __init__(self, shared: AsyncInbox, index: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.shared = shared
        self.index = index

    def push(self, out: TokenOutput) -> None:
        push_all([(self, out)])

    def put_now(self, out: TokenOutput) -> None:
        """On the event loop's own thread."""
        self.shared.put((self.index, out))


def push_all(deliveries: list[tuple[OutputSink, TokenOutput]]) -> None:
    """Delivers many outputs at once: one wake-up per event loop for all its async sinks (not
    one per output), which keeps a busy asyncio front responsive when a step reports hundreds
    of sequences."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[AsyncQueueSink, TokenOutput]]] = {}
    for sink, out in deliveries:
        if isinstance(sink, AsyncQueueSink):
            by_loop.setdefault(sink.loop, []).append((sink, out))
        else:
            sink.push(out)
    for loop, items in by_loop.items():
        # A closed event loop raises: nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_put_all, items)


def _put_all(items: list[tuple[AsyncQueueSink, TokenOutput]]) -> None:
    for sink, out in items:
        sink.put_now(out)
