"""Handing results to callers: a whole result, or a stream of deltas (sync and asyncio).

The scheduler pushes `TokenOutput`s into each sequence's sink; here, on the caller's side, each
sequence's `OutputAssembler` turns them into text and SGLang's dicts (so detokenizing never
runs on the scheduler's thread). A reader that fell behind gets one delta per sequence for
everything that arrived. A caller that stops reading early (closes a stream, is cancelled)
aborts the sequences still running, so their KV is freed at once; a scheduler that died ends
every wait with `EngineClosedError`, never a hang.
"""

from __future__ import annotations

import queue
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable, Iterator, Sequence
from typing import Any

from sglr.engine.assembler import OutputAssembler
from sglr.engine.output import AsyncInbox, QueueSink
from sglr.engine.scheduler.handle import SchedulerHandle
from sglr.engine.token_output import TokenOutput
from sglr.errors import EngineClosedError

_POLL_S = 1.0


def abort_rids(scheduler: SchedulerHandle, rids: Iterable[str]) -> None:
    # Aborting a request that has just finished is a no-op in the loop.
    for rid in rids:
        scheduler.abort(rid)


def wait_result(scheduler: SchedulerHandle, sink: QueueSink, assembler: OutputAssembler) -> dict[str, Any]:
    while not assembler.finished:
        out = _next_output(scheduler, sink, _POLL_S)
        if out is not None:
            assembler.add(out)
    return assembler.result()


def stream(
    scheduler: SchedulerHandle,
    sinks: Sequence[QueueSink],
    assemblers: Sequence[OutputAssembler],
    is_batch: bool,
) -> Iterator[dict[str, Any]]:
    pending = set(range(len(sinks)))
    try:
        while pending:
            for index in sorted(pending):
                sink, assembler = sinks[index], assemblers[index]
                out = _next_output(scheduler, sink, 0.001 if len(pending) > 1 else _POLL_S)
                while out is not None:
                    assembler.add(out)
                    out = sink.get_nowait()
                delta = assembler.delta()
                if delta is not None:
                    yield with_index(delta, index, is_batch)
                if assembler.finished:
                    pending.discard(index)
    finally:  # the caller stopped reading early: abort what is still running
        abort_rids(scheduler, (assemblers[index].rid for index in pending))


def _next_output(scheduler: SchedulerHandle, sink: QueueSink, timeout: float) -> TokenOutput | None:
    try:
        return sink.get(timeout=timeout)
    except queue.Empty:
        if not scheduler.is_alive and sink.queue.empty():
            raise EngineClosedError(f"the engine stopped: {scheduler.fatal_error}") from None
        return None


async def async_results(
    scheduler: SchedulerHandle, outputs: AsyncInbox, assemblers: Sequence[OutputAssembler]
) -> list[dict[str, Any]]:
    """Every sequence's result, in order; cancelling the wait aborts the unfinished ones."""
    unfinished = set(range(len(assemblers)))
    try:
        while unfinished:
            for index, out in await outputs.take_all():
                assemblers[index].add(out)
                if assemblers[index].finished:
                    unfinished.discard(index)
    except BaseException:  # cancelled (e.g. the HTTP client went away): stop the work too
        abort_rids(scheduler, (assemblers[index].rid for index in unfinished))
        raise
    return [assembler.result() for assembler in assemblers]


async def async_stream(
    scheduler: SchedulerHandle,
    outputs: AsyncInbox,
    assemblers: Sequence[OutputAssembler],
    is_batch: bool,
) -> AsyncIterator[dict[str, Any]]:
    unfinished = set(range(len(assemblers)))
    try:
        while unfinished:
            arrived = await outputs.take_all()
            touched: dict[int, None] = {}
            for index, out in arrived:
                assemblers[index].add(out)
                touched[index] = None
            # NOTE: one delta per sequence for everything that arrived, not one per token: under
            # load this keeps the per-token cost of streaming (events, HTTP writes) from growing
            # with the backlog.
            for index in touched:
                delta = assemblers[index].delta()
                if delta is not None:
                    yield with_index(delta, index, is_batch)
                if assemblers[index].finished:
                    unfinished.discard(index)
    finally:
        # Closed or cancelled before the end (a client that went away): free the slots now
        # instead of generating for nobody until max_new_tokens.
        abort_rids(scheduler, (assemblers[index].rid for index in unfinished))


class DeltaStream:
    """A streamed request's deltas (an async iterator, closed with `aclose`), and what is known
    before the first one arrives: each sequence's prompt length, `num_prompt_tokens`."""

    def __init__(self, deltas: AsyncGenerator[dict[str, Any], None], num_prompt_tokens: list[int]) -> None:
        self._deltas = deltas
        self.num_prompt_tokens = num_prompt_tokens

    def __aiter__(self) -> DeltaStream:
        return self

    def __anext__(self) -> Awaitable[dict[str, Any]]:
        return self._deltas.__anext__()

    async def aclose(self) -> None:
        await self._deltas.aclose()


def with_index(delta: dict[str, Any], index: int, is_batch: bool) -> dict[str, Any]:
    if is_batch:
        delta = dict(delta, index=index)
    return delta
