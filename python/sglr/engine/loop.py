"""`SchedulerLoop`: the engine's one thread that owns all request and KV state.

Each step reads as schedule -> run -> process outputs, twice: an extend pass (admissions,
prompt chunks, jump-forward runs), then a decode pass for everything else that is generating
(retracting the newest requests when KV runs short). New requests, aborts and cache flushes
arrive through the inbox between steps. Callers talk to it only through `submit`, `abort`,
`flush_cache`, `stop` and the read-only stats.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sglr.engine.admission import Admitter
from sglr.engine.batch_executor import BatchExecutor
from sglr.engine.config import EngineConfig
from sglr.engine.constraints.runtime import Constraints
from sglr.engine.finish import FinishAbort
from sglr.engine.kv import KVPool
from sglr.engine.lifecycle import RequestTable
from sglr.engine.output import OutputSink
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.request import Phase, Req, TokenizedRequest
from sglr.engine.retraction import reserve_decode_slots
from sglr.engine.stats import EngineStats
from sglr.engine.step_results import StepResults
from sglr.engine.tokenizer import EngineTokenizer
from sglr.engine.wait_queue import WaitQueue
from sglr.errors import EngineClosedError, EngineInternalError, InvalidRequestError, RequestAbortedError
from sglr.model.runner import ModelRunner

logger = logging.getLogger("sglr.engine")

# Sleep while requests wait for memory that only other waiting work can free.
_IDLE_WAIT_S = 0.002


class SchedulerLoop:
    def __init__(
        self,
        config: EngineConfig,
        runner: ModelRunner,
        tokenizer: EngineTokenizer,
        max_running_requests: int,
        chunked_prefill_size: int,
        after_iteration: Callable[[], None] | None = None,
    ) -> None:
        """`after_iteration`: called on the loop thread after each inbox drain and each step
        (a worker process sends the outputs gathered meanwhile as one message)."""
        self.config = config
        self._after_iteration = after_iteration
        self.runner = runner
        self.stats = EngineStats()
        self.pool = KVPool(
            runner.num_kv_slots,
            runner.runner_config.max_num_reqs,
            use_radix_cache=not config.disable_radix_cache,
        )
        self.queue = WaitQueue(config, max_running_requests, chunked_prefill_size, runner.max_context_len)
        self.tokenizer = tokenizer
        self.out = OutputProcessor(runner.max_context_len)
        self.table = RequestTable(self.pool, self.out, self.stats, self.queue.remove, self.queue.on_idle)
        self.constraints = Constraints(tokenizer, use_jump_forward=not config.disable_jump_forward)
        self.admitter = Admitter(self.pool, self.table, self.queue, self.stats)
        self.executor = BatchExecutor(runner, self.constraints.token_masks)
        self.results = StepResults(self.pool, self.table, self.out, self.constraints, self.stats)
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stopping = False
        self.fatal_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sglr-scheduler", daemon=True)

    # ----- caller side (any thread) -----

    def start(self) -> None:
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, request: TokenizedRequest, sink: OutputSink) -> None:
        """Queues a request whose outputs go to `sink`; a constrained request compiles first, off
        this thread. The inbox sees "add" before "constraint_ready" (it is FIFO), so a compile
        that finishes at once is never taken for the result of an aborted request."""
        req = Req.from_tokenized(request, sink, self.tokenizer)
        if req.params.has_constraint:
            req.phase = Phase.COMPILING
        self._inbox.put(("add", req))
        if req.params.has_constraint:
            self.constraints.start_compile(req, self._constraint_ready)

    def abort(self, rid: str) -> None:
        self._inbox.put(("abort", rid))

    def flush_cache(self) -> Future[bool]:
        return self.call(self.table.flush_cache)

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Runs `fn` on the loop thread between steps; its result or error in the future."""
        future: Future[Any] = Future()
        self._inbox.put(("call", (fn, future)))
        return future

    def stop(self, timeout: float | None = 30.0) -> None:
        self._inbox.put(("stop", None))
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.constraints.shutdown()

    @property
    def num_waiting(self) -> int:
        return len(self.queue)

    @property
    def num_running(self) -> int:
        return len(self.table.decoding)

    def get_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.stats.as_dict()
        stats.update(self.pool.stats())
        stats.update(
            num_running_requests=self.num_running,
            num_waiting_requests=self.num_waiting,
            constraint_cache_hits=self.constraints.num_cache_hits,
        )
        return stats

    def _constraint_ready(self, req: Req, error: InvalidRequestError | None) -> None:
        self._inbox.put(("constraint_ready", (req, error)))

    # ----- the loop thread -----

    def _run(self) -> None:
        extra = self._after_iteration or (lambda: None)

        def after() -> None:
            self.out.deliver()
            extra()

        try:
            while not self._stopping:
                self._drain_inbox(block=not self._has_work())
                after()
                if self._stopping:
                    break
                if self._has_work():
                    self._step_isolated()
                    after()
        except BaseException as exc:  # a bug in the loop itself: fail everything, never hang
            logger.exception("scheduler loop died")
            self.fatal_error = exc
        finally:
            message = (
                "the engine is shutting down"
                if self.fatal_error is None
                else f"engine error: {self.fatal_error}"
            )
            self.table.fail_all(message, self._inbox)
            after()

    @property
    def has_work(self) -> bool:
        return self._has_work()

    def _has_work(self) -> bool:
        return bool(self.table.decoding) or len(self.queue) > 0

    def _drain_inbox(self, block: bool) -> None:
        while True:
            try:
                command, payload = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            if command == "add":
                self.table.add(payload)
                if payload.phase is not Phase.COMPILING:
                    self.queue.add(payload)
            elif command == "constraint_ready":
                self._on_constraint_ready(*payload)
            elif command == "abort":
                self.table.abort(payload, RequestAbortedError("aborted by the client"))
            elif command == "call":
                fn, future = payload
                try:
                    future.set_result(fn())
                except Exception as exc:
                    future.set_exception(exc)
            elif command == "stop":
                self._stopping = True
                return

    def _on_constraint_ready(self, req: Req, error: InvalidRequestError | None) -> None:
        if req.uid not in self.table.reqs:
            return  # aborted while compiling
        if error is not None:
            req.finish_reason = FinishAbort(error)
            self.table.finish(req)
        else:
            self.queue.add(req)

    def _step_isolated(self) -> None:
        """One step; an unexpected error fails the requests in flight, not the engine."""
        started = time.monotonic()
        try:
            progressed = self._step()
        except Exception as exc:
            if getattr(self.runner, "tp", None) is not None:
                # The ranks may no longer be in step (a rank died, a collective failed): the
                # group is lost, and with it every request.
                raise EngineClosedError(f"a tensor-parallel rank failed: {exc}") from exc
            logger.exception("engine step failed; aborting the requests in flight")
            self.table.abort_running(EngineInternalError(f"internal error while running the request: {exc}"))
            progressed = True
        self.stats.busy_seconds += time.monotonic() - started
        self.stats.num_steps += 1
        if self.config.debug_invariants:
            self.check_invariants()
            self.stats.num_invariant_checks += 1
        if not progressed:
            time.sleep(_IDLE_WAIT_S)

    def _step(self) -> bool:
        extend = self.admitter.next_extend()
        if extend:
            self.results.after_extend(extend, self.executor.extend(extend))
        extended = {item.req.uid for item in extend}
        decode = [req for req in self.table.decoding if req.uid not in extended]
        if decode:
            decode = reserve_decode_slots(decode, self.pool, self.table, self.queue, self.stats)
            if decode:
                row_writes = self.pool.take_row_writes([req.kv for req in decode])
                self.results.after_decode(decode, self.executor.decode(decode, row_writes))
                self.queue.on_decode_step()
        elif not extend and self.admitter.last_stop_reason == "memory":
            self.table.abort_unfittable(self.pool.num_slots)
            return False
        return bool(extend or decode)

    def check_invariants(self) -> None:
        """Slot, row and scheduler accounting (raises on any leak)."""
        self.pool.check_invariants()
        self.queue.check_invariants()
        for req in self.table.decoding:
            assert req.kv.is_admitted and req.fill_len - req.num_computed >= 1, (
                f"request {req.rid} lost its state"
            )
