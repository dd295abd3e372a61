"""Handing results to callers: waiting for a result, streaming deltas (sync and asyncio).

The scheduler loop pushes `StreamEvent`s into each sequence's sink; these helpers read them on
the caller's side. A caller that stops reading early (closes a stream, is cancelled) aborts the
sequences still running, so their KV is freed at once; a loop that died ends every wait with
`EngineClosedError`, never a hang.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Protocol

from sglr.engine.io import NormalizedInput
from sglr.engine.output import QueueSink, StreamEvent, merge_deltas
from sglr.errors import EngineClosedError

_POLL_S = 1.0


class Scheduler(Protocol):
    """The side of the scheduler loop a caller sees."""

    @property
    def is_alive(self) -> bool: ...

    fatal_error: BaseException | None

    def abort(self, rid: str) -> None: ...


def abort_rids(loop: Scheduler, rids: Iterable[str]) -> None:
    # Aborting a request that has just finished is a no-op in the loop.
    for rid in rids:
        loop.abort(rid)


def wait_result(loop: Scheduler, sink: QueueSink) -> dict[str, Any]:
    while True:
        event = _next_event(loop, sink, _POLL_S)
        if event is None:
            continue
        if event.error is not None:
            raise event.error
        if event.result is not None:
            return event.result


def stream(loop: Scheduler, batch: NormalizedInput, sinks: list[QueueSink]) -> Iterator[dict[str, Any]]:
    pending = dict(enumerate(sinks))
    try:
        while pending:
            for index, sink in list(pending.items()):
                event = _next_event(loop, sink, 0.001 if len(pending) > 1 else _POLL_S)
                if event is None:
                    continue
                if event.error is not None:
                    raise event.error
                if event.delta is not None:
                    yield with_index(event.delta, index, batch.is_batch)
                if event.result is not None:
                    del pending[index]
    finally:  # the caller stopped reading early: abort what is still running
        abort_rids(loop, (batch.specs[index].rid for index in pending))


def _next_event(loop: Scheduler, sink: QueueSink, timeout: float) -> StreamEvent | None:
    try:
        return sink.get(timeout=timeout)
    except queue.Empty:
        if not loop.is_alive and sink.queue.empty():
            raise EngineClosedError(f"the engine stopped: {loop.fatal_error}") from None
        return None


async def async_wait_result(sink: Any) -> dict[str, Any]:
    while True:
        event = await sink.get()
        if event.error is not None:
            raise event.error
        if event.result is not None:
            return event.result


async def async_stream(
    loop: Scheduler, batch: NormalizedInput, events: asyncio.Queue[tuple[int, StreamEvent]]
) -> AsyncIterator[dict[str, Any]]:
    unfinished = set(range(len(batch.specs)))
    try:
        while unfinished:
            arrived = [await events.get()]
            while not events.empty():
                arrived.append(events.get_nowait())
            # NOTE: a reader that fell behind gets one chunk per sequence for everything that has
            # arrived, not one per token: under load this keeps the per-token cost of streaming
            # (events, HTTP writes) from growing with the backlog.
            merged: dict[int, dict[str, Any]] = {}
            for index, event in arrived:
                if event.error is not None:
                    raise event.error
                if event.delta is not None:
                    earlier = merged.get(index)
                    merged[index] = event.delta if earlier is None else merge_deltas(earlier, event.delta)
                if event.result is not None:
                    unfinished.discard(index)
            for index, delta in merged.items():
                yield with_index(delta, index, batch.is_batch)
    finally:
        # Closed or cancelled before the end (a client that went away): free the slots now
        # instead of generating for nobody until max_new_tokens.
        abort_rids(loop, (batch.specs[index].rid for index in unfinished))


def with_index(delta: dict[str, Any], index: int, is_batch: bool) -> dict[str, Any]:
    if is_batch:
        delta = dict(delta, index=index)
    return delta
