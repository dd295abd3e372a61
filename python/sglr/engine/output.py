"""Delivering results from the scheduler thread to callers: sinks and response dicts.

The loop thread pushes `StreamEvent`s into a request's sink; the caller's thread (or asyncio
loop) reads them. Dict layouts follow SGLang's native `/generate` responses: `text`,
`output_ids`, and `meta_info` with `id`, `finish_reason`, token counts and logprobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class StreamEvent:
    """`delta`: an incremental chunk (new text / ids / logprobs, cumulative counts).
    `result`: the whole response, set on the last event. `error`: the request failed."""

    delta: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: BaseException | None = None

    @property
    def is_last(self) -> bool:
        return self.result is not None or self.error is not None


# meta_info lists that a delta holds only the new part of; every other key is a current value.
INCREMENTAL_META_KEYS = ("output_token_logprobs", "output_top_logprobs")


def merge_deltas(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One delta equal to `first` followed by `later` (of the same sequence): text, ids and the
    incremental logprob lists concatenated, every other field from `later`."""
    meta = dict(later["meta_info"])
    for key in INCREMENTAL_META_KEYS:
        if key in first["meta_info"] or key in later["meta_info"]:
            meta[key] = first["meta_info"].get(key, []) + later["meta_info"].get(key, [])
    return {
        "text": first["text"] + later["text"],
        "output_ids": first["output_ids"] + later["output_ids"],
        "meta_info": meta,
    }


class OutputSink(Protocol):
    wants_stream: bool

    def push(self, event: StreamEvent) -> None: ...


class QueueSink:
    """For synchronous callers: events land in a thread-safe queue."""

    def __init__(self, wants_stream: bool) -> None:
        self.wants_stream = wants_stream
        self.queue: queue.SimpleQueue[StreamEvent] = queue.SimpleQueue()

    def push(self, event: StreamEvent) -> None:
        self.queue.put(event)

    def get(self, timeout: float | None = None) -> StreamEvent:
        return self.queue.get(timeout=timeout)


class AsyncQueueSink:
    """For asyncio callers: events are handed to the caller's event loop thread-safely.

    Sinks of one streamed batch share a queue (`shared`, with their `index`): the reader then
    waits on one queue instead of one task per sequence per event."""

    def __init__(
        self,
        wants_stream: bool,
        loop: asyncio.AbstractEventLoop | None = None,
        shared: asyncio.Queue[tuple[int, StreamEvent]] | None = None,
        index: int = 0,
    ) -> None:
        self.wants_stream = wants_stream
        self.loop = loop or asyncio.get_running_loop()
        self.queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        self.shared = shared
        self.index = index

    def push(self, event: StreamEvent) -> None:
        # A closed event loop raises: nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            if self.shared is not None:
                self.loop.call_soon_threadsafe(self.shared.put_nowait, (self.index, event))
            else:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, event)

    async def get(self) -> StreamEvent:
        return await self.queue.get()
