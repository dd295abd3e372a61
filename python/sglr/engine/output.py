"""Where the scheduler's `TokenOutput`s go: one sink per sequence, read on the caller's side.

The loop thread pushes; the caller's thread (`QueueSink`) or asyncio loop (`AsyncQueueSink`)
reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
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


class AsyncQueueSink:
    """For asyncio callers: outputs are handed to the caller's event loop thread-safely, into
    a queue shared by the sequences of one call (each output tagged with its `index`), so the
    reader waits on one queue instead of one task per sequence."""

    def __init__(self, shared: asyncio.Queue[tuple[int, TokenOutput]], index: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.shared = shared
        self.index = index

    def push(self, out: TokenOutput) -> None:
        push_all([(self, out)])

    def put_now(self, out: TokenOutput) -> None:
        """On the event loop's own thread."""
        self.shared.put_nowait((self.index, out))


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
