"""`RequestTable`: the requests in flight on the scheduler thread, and how each one ends.

Every request ends here, exactly once, through `finish`: its KV hold is released (kept in the
prefix cache unless it was aborted), the counters are updated and the result is published.
`abort` ends a request early with a typed error; `fail_all` ends everything when the loop stops.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from typing import Any

from sglr.engine.kv import KVPool
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.request import Phase, Req
from sglr.engine.stats import EngineStats
from sglr.errors import EngineClosedError, InvalidRequestError, SglrError

logger = logging.getLogger("sglr.engine")


class RequestTable:
    def __init__(
        self,
        pool: KVPool,
        out: OutputProcessor,
        stats: EngineStats,
        on_dequeue: Callable[[int], None],
        on_idle: Callable[[], None],
    ) -> None:
        self.pool = pool
        self.out = out
        self.stats = stats
        self._on_dequeue = on_dequeue  # drops a uid from the waiting queue
        self._on_idle = on_idle  # nothing in flight any more
        self.reqs: dict[int, Req] = {}  # every request not finished yet, by uid
        self.uid_by_rid: dict[str, int] = {}
        self.decoding: list[Req] = []

    def add(self, req: Req) -> None:
        self.reqs[req.uid] = req
        self.uid_by_rid[req.rid] = req.uid
        self.stats.num_requests += 1

    def get(self, rid: str) -> Req | None:
        uid = self.uid_by_rid.get(rid)
        return self.reqs.get(uid) if uid is not None else None

    def waiting(self) -> list[Req]:
        return sorted(
            (r for r in self.reqs.values() if r.phase is Phase.WAITING), key=lambda r: r.arrival_time
        )

    def finish(self, req: Req) -> None:
        """Ends `req` (its `finish_reason` is set): release KV, count, publish."""
        assert req.finish_reason is not None
        self.pool.release(
            req.kv, req.computed_keys(), req.spec.namespace, keep=not req.finish_reason.is_abort
        )
        if req in self.decoding:
            self.decoding.remove(req)
        self.reqs.pop(req.uid, None)
        if self.uid_by_rid.get(req.rid) == req.uid:
            del self.uid_by_rid[req.rid]
        if req.finish_reason.is_abort:
            self.stats.num_aborted += 1
        else:
            self.stats.num_finished += 1
        self.out.publish(req)
        if not self.reqs:
            self._on_idle()

    def abort(self, rid: str, error: SglrError) -> None:
        """Ends request `rid` with `error` (a no-op when it has already finished)."""
        req = self.get(rid)
        if req is None or req.phase is Phase.FINISHED:
            return
        self._on_dequeue(req.uid)
        self.out.mark_aborted(req, error)
        self.finish(req)

    def flush_cache(self) -> bool:
        """Drops the whole prefix cache; refused (False) while requests are in flight."""
        if self.reqs:
            return False
        self.pool.reset()
        return True

    def abort_unfittable(self, num_kv_slots: int) -> None:
        """Nothing runs and nothing can be admitted: the head request can never fit."""
        waiting = self.waiting()
        if waiting:
            self.abort(
                waiting[0].rid,
                InvalidRequestError(
                    f"the request needs more KV cache than the engine has ({num_kv_slots} tokens); "
                    "lower max_new_tokens or raise max_total_tokens",
                    param="sampling_params.max_new_tokens",
                ),
            )

    def abort_running(self, error: SglrError) -> None:
        """After a failed step: ends every request that was being computed."""
        for req in list(self.reqs.values()):
            if req.kv.is_admitted or req.phase is Phase.PREFILLING:
                self.abort(req.rid, error)

    def fail_all(self, message: str, inbox: queue.SimpleQueue[tuple[str, Any]]) -> None:
        """The loop is stopping: every request in flight, and every one still in the inbox,
        ends with `EngineClosedError`."""
        for req in list(self.reqs.values()):
            if req.phase is Phase.FINISHED:
                continue
            self.out.mark_aborted(req, EngineClosedError(message))
            try:
                self.finish(req)
            except Exception:  # the loop's state is broken: still answer the caller
                self.out.publish(req)
        while True:
            try:
                command, payload = inbox.get_nowait()
            except queue.Empty:
                break
            if command == "add":
                self.out.mark_aborted(payload, EngineClosedError(message))
                self.out.publish(payload)
            elif command == "call":
                payload[1].set_exception(EngineClosedError(message))
