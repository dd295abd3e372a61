"""`RequestEndings`: how every request ends, exactly once.

`finish` ends a request whose `finish_reason` is set: its KV hold is released (kept in the
prefix cache unless it was aborted), it leaves the running set and the table, the counters are
updated and the result is published (a request of an open session pins its KV there:
`session_pins.py`). `abort` ends a request early with a typed error;
`fail_all` ends everything when the loop stops; `refuse` answers a request that never reached
the table (still in the inbox when the loop stopped).
"""

from __future__ import annotations

import logging

from sglr.engine.kv import KVPool
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.request import Phase, Req
from sglr.engine.scheduler.prefill import PrefillQueue
from sglr.engine.scheduler.running import RunningSet
from sglr.engine.scheduler.session_pins import SessionPins
from sglr.engine.scheduler.table import RequestTable
from sglr.engine.stats import EngineStats
from sglr.errors import EngineClosedError, InvalidRequestError, SglrError

logger = logging.getLogger("sglr.engine")


class RequestEndings:
    def __init__(
        self,
        pool: KVPool,
        table: RequestTable,
        prefill: PrefillQueue,
        running: RunningSet,
        out: OutputProcessor,
        stats: EngineStats,
    ) -> None:
        self._pool = pool
        self._table = table
        self._prefill = prefill
        self._running = running
        self._out = out
        self._stats = stats
        self.sessions = SessionPins(pool)

    def finish(self, req: Req) -> None:
        """Ends `req` (its `finish_reason` is set): release KV, count, publish."""
        assert req.finish_reason is not None
        keys, keep = req.computed_keys(), not req.finish_reason.is_abort
        self._pool.release(req.kv, keys, req.cache_namespace, keep=keep)
        if keep and req.session_id is not None:
            self.sessions.on_finished(req.session_id, keys, req.cache_namespace)
        self._running.discard(req)
        self._table.to_finished(req)
        self._prefill.on_request_end(req)
        if req.finish_reason.is_abort:
            self._stats.num_aborted += 1
        else:
            self._stats.num_finished += 1
        self._stats.count_finished(req.lora_id, req.prompt_len, len(req.output_ids))
        self._out.publish(req)
        if not self._table:
            self._prefill.on_idle()

    def abort(self, rid: str, error: SglrError) -> None:
        """Ends request `rid` with `error` (a no-op when it has already finished)."""
        req = self._table.get(rid)
        if req is None or req.phase is Phase.FINISHED:
            return
        self._prefill.remove(req.uid)
        self._out.mark_aborted(req, error)
        self.finish(req)

    def abort_unfittable(self, num_kv_slots: int) -> None:
        """Nothing runs and nothing can be admitted: the request at the head can never fit. A
        prompt admitted in chunks comes first: its next chunk (with the output it reserves) needs
        more than its own chunks leave free, and nothing else will ever release KV for it."""
        prefilling = sorted(
            (r for r in self._table if r.phase is Phase.PREFILLING), key=lambda r: r.arrival_time
        )
        stuck = prefilling or [r for r in self._table.waiting() if not self._prefill.is_held(r)]
        if stuck:
            self.abort(
                stuck[0].rid,
                InvalidRequestError(
                    f"the request needs more KV cache than the engine has ({num_kv_slots} tokens); "
                    "lower max_new_tokens or raise max_total_tokens",
                    param="sampling_params.max_new_tokens",
                ),
            )

    def abort_running(self, error: SglrError) -> None:
        """After a failed step: ends every request that was being computed."""
        for req in self._table:
            if req.kv.is_admitted or req.phase is Phase.PREFILLING:
                self.abort(req.rid, error)

    def fail_all(self, message: str) -> None:
        """The loop is stopping: every request in flight ends with `EngineClosedError(message)`."""
        for req in self._table:
            if req.phase is Phase.FINISHED:
                continue
            self._out.mark_aborted(req, EngineClosedError(message))
            try:
                self.finish(req)
            except Exception:  # the loop's state is broken: still answer the caller
                self._publish_final(req)

    def refuse(self, req: Req, error: SglrError) -> None:
        """Answers a request the table never took (still in the inbox) with `error`."""
        self._out.mark_aborted(req, error)
        self._publish_final(req)

    def _publish_final(self, req: Req) -> None:
        self._table.to_finished(req)
        self._out.publish(req)
