"""`SchedulerLoop`: the engine's one thread that owns all request and KV state.

Each step reads as schedule -> run -> process outputs, twice: an extend pass (admissions, prompt
chunks, jump-forward runs), then a decode pass for the rest of the running set (retracting the
newest when KV runs short). Requests, aborts and calls arrive through the inbox (`messages.py`)
between steps; callers use the `SchedulerHandle` methods (those answered between steps in
`loop_calls.py`; a worker also uses `stats`, `has_work`, `call`).

Who owns what (each alone changes its collection): the request table (`table.py`), the prefill
queue (`prefill.py`), the running set (`running.py`), the KV pool (`engine/kv/`), the runner's
adapters (`lora_lifecycle.py`); `endings.py` ends requests, `results.py` applies a pass's outputs.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sglr.engine.batch_executor import BatchExecutor
from sglr.engine.config import EngineConfig
from sglr.engine.constraints.runtime import Constraints
from sglr.engine.finish import FinishAbort
from sglr.engine.kv import KVPool, TreeSummary, TreeSummaryLimits, summarize_tree
from sglr.engine.output import OutputSink
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.request import Phase, Req, TokenizedRequest
from sglr.engine.scheduler.decode_pass import PlainDecode
from sglr.engine.scheduler.endings import RequestEndings
from sglr.engine.scheduler.loop_calls import LoopCalls
from sglr.engine.scheduler.lora_lifecycle import LoraLifecycle
from sglr.engine.scheduler.messages import (
    AbortRequest,
    AddRequest,
    CallOnLoop,
    ConstraintReady,
    InboxMessage,
    StopLoop,
)
from sglr.engine.scheduler.overlap import OverlappedDecode
from sglr.engine.scheduler.prefill import PrefillQueue
from sglr.engine.scheduler.results import StepResults
from sglr.engine.scheduler.running import RunningSet
from sglr.engine.scheduler.table import RequestTable
from sglr.engine.speculative.speculator import Speculator
from sglr.engine.stats import EngineStats
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import EngineClosedError, EngineInternalError, InvalidRequestError, RequestAbortedError
from sglr.model.runner import ModelRunner

logger = logging.getLogger("sglr.engine")

# Sleep while requests wait for memory that only other waiting work can free.
_IDLE_WAIT_S = 0.002


class SchedulerLoop(LoopCalls):
    def __init__(
        self,
        config: EngineConfig,
        runner: ModelRunner,
        tokenizer: EngineTokenizer,
        max_running_requests: int,
        chunked_prefill_size: int,
        after_iteration: Callable[[], None] | None = None,
    ) -> None:
        """`after_iteration`: run on the loop thread after each inbox drain and step (a worker's send)."""
        self._config = config
        self._after_iteration = after_iteration
        self._runner = runner
        self.stats = EngineStats()
        self._pool = KVPool.for_runner(config, runner)
        self._tokenizer = tokenizer
        self._out = OutputProcessor(runner.max_context_len)
        self._table = RequestTable(self.stats)
        self._prefill = PrefillQueue(
            config,
            max_running_requests,
            chunked_prefill_size,
            runner.max_context_len,
            self._pool,
            self._table,
            self.stats,
        )
        self._loras = LoraLifecycle(runner, self._prefill.lora_admission)
        self._running = RunningSet(self._pool, self._table, self._prefill, self.stats)
        self._endings = RequestEndings(
            self._pool, self._table, self._prefill, self._running, self._out, self.stats
        )
        self._constraints = Constraints.for_engine(tokenizer, config)
        self._executor = BatchExecutor(runner, self._constraints.token_masks)
        self._speculator = Speculator.for_runner(config, runner, self.stats)
        self._results = StepResults(
            self._pool,
            self._running,
            self._endings,
            self._out,
            self._constraints,
            self.stats,
            self._speculator,
        )
        self._decode = (
            OverlappedDecode(self._pool, self._running, self._results, self._executor)
            if config.overlap_schedule_on(getattr(runner, "device", "cpu"), self._speculator is not None)
            else PlainDecode(self._pool, self._running, self._results, self._executor, self._speculator)
        )
        self._inbox: queue.SimpleQueue[InboxMessage] = queue.SimpleQueue()
        self._stopping = False
        self._closed_message: str | None = None  # set when the loop ends: the inbox is refused
        self._fatal_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sglr-scheduler", daemon=True)

    # ----- caller side (any thread) -----

    def start(self) -> None:
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def fatal_error(self) -> BaseException | None:
        return self._fatal_error

    @property
    def worker_pids(self) -> list[int]:
        return []

    def submit(self, request: TokenizedRequest, sink: OutputSink) -> None:
        """Queues a request whose outputs go to `sink`; a constrained request compiles first, off
        this thread. The inbox sees `AddRequest` before `ConstraintReady` (it is FIFO), so a
        compile that finishes at once is never taken for the result of an aborted request."""
        req = Req.from_tokenized(request, sink, self._tokenizer)
        self._inbox.put(AddRequest(req))
        if req.params.has_constraint:
            self._constraints.start_compile(req, self._constraint_ready)

    def abort(self, rid: str) -> None:
        self._inbox.put(AbortRequest(rid))

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Runs `fn` on the loop thread between steps; its result or error in the future."""
        future: Future[Any] = Future()
        self._inbox.put(CallOnLoop(fn, future))
        return future

    def stop(self, timeout: float | None = 30.0) -> None:
        self._inbox.put(StopLoop())
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._constraints.shutdown()
        if not self._thread.is_alive():  # (no forward is in flight)
            self._decode.close()
        if not self._thread.is_alive():  # (the loop no longer touches the pool)
            self._pool.close()

    @property
    def num_waiting(self) -> int:
        return len(self._prefill)

    @property
    def num_running(self) -> int:
        return len(self._running)

    def get_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {**self.stats.as_dict(), **self._pool.stats()}
        stats.update(
            num_running_requests=self.num_running,
            num_waiting_requests=self.num_waiting,
            constraint_cache_hits=self._constraints.num_cache_hits,
            num_open_sessions=len(self._endings.sessions),
            num_locked_kv_slots=self._pool.index.protected_size(),  # at rest: the sessions' pins
        )
        return stats

    def get_tree_summary(self, limits: TreeSummaryLimits) -> TreeSummary:
        return summarize_tree(self._pool.tree, limits)  # any thread: the Rust tree locks itself

    def _constraint_ready(self, req: Req, error: InvalidRequestError | None) -> None:
        self._inbox.put(ConstraintReady(req, error))

    # ----- the loop thread -----

    def _run(self) -> None:
        extra = self._after_iteration or (lambda: None)

        def after() -> None:
            self._out.deliver()
            extra()

        try:
            while not self._stopping:
                self._drain_inbox(block=not self.has_work)
                after()
                if self._stopping:
                    break
                if self.has_work:
                    self._step_isolated()
                    after()
        except BaseException as exc:  # a bug in the loop itself: fail everything, never hang
            logger.exception("scheduler loop died")
            self._fatal_error = exc
        finally:
            self._closed_message = (
                "the engine is shutting down"
                if self._fatal_error is None
                else f"engine error: {self._fatal_error}"
            )
            self._endings.fail_all(self._closed_message)
            self._drain_inbox(block=False)  # what is still there is refused
            after()

    @property
    def has_work(self) -> bool:
        return bool(self._running) or len(self._prefill) > 0

    def _drain_inbox(self, block: bool) -> None:
        while not self._stopping or self._closed_message is not None:
            try:
                message = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            self._handle(message)

    def _handle(self, message: InboxMessage) -> None:
        """The one place inbox messages are read. Once the loop has ended (`_closed_message`),
        new requests and calls are refused with `EngineClosedError`."""
        closed = self._closed_message
        match message:
            case AddRequest(req):
                # (An adapter may have been unloaded between the front's check and now.)
                refusal = self._loras.refusal(req.lora_id) if closed is None else EngineClosedError(closed)
                if refusal is not None:
                    self._endings.refuse(req, refusal)
                    return
                self._table.add(req)
                if req.phase is not Phase.COMPILING:
                    self._prefill.add(req)
            case ConstraintReady(req, error):
                self._on_constraint_ready(req, error)
            case AbortRequest(rid):
                self._endings.abort(rid, RequestAbortedError("aborted by the client"))
                self._prune_speculation()
            case CallOnLoop(fn, future):
                if closed is not None:
                    future.set_exception(EngineClosedError(closed))
                    return
                try:
                    future.set_result(fn())
                except Exception as exc:
                    future.set_exception(exc)
            case StopLoop():
                self._stopping = True

    def _on_constraint_ready(self, req: Req, error: InvalidRequestError | None) -> None:
        if req not in self._table:
            return  # aborted while compiling (or refused when the loop ended)
        if error is not None:
            req.finish_reason = FinishAbort(error)
            self._endings.finish(req)
        else:
            self._prefill.add(req)

    def _step_isolated(self) -> None:
        """One step; an unexpected error fails the requests in flight, not the engine."""
        started = time.monotonic()
        try:
            progressed = self._step()
        except Exception as exc:
            if getattr(self._runner, "tp", None) is not None:
                # The ranks may no longer be in step (a rank died, a collective failed): the
                # group is lost, and with it every request.
                raise EngineClosedError(f"a tensor-parallel rank failed: {exc}") from exc
            logger.exception("engine step failed; aborting the requests in flight")
            self._endings.abort_running(
                EngineInternalError(f"internal error while running the request: {exc}")
            )
            progressed = True
        self.stats.busy_seconds += time.monotonic() - started
        self.stats.num_steps += 1
        if self._config.debug_invariants:
            self.check_invariants()
            self.stats.num_invariant_checks += 1
        if not progressed:
            time.sleep(_IDLE_WAIT_S)

    def _step(self) -> bool:
        extend = self._prefill.next_extend(self._running) + self._running.jump_forward_runs()
        if extend:
            self._results.after_extend(extend, self._executor.extend(extend))
        candidates = self._running.decode_candidates({item.req.uid for item in extend})
        decoded = self._decode.step(candidates)
        if decoded:
            self._prefill.on_decode_step()
        elif not candidates and not extend and self._prefill.last_stop_reason == "memory":
            self._endings.abort_unfittable(self._pool.num_slots)
            return False
        self._prune_speculation()
        return bool(extend or decoded)

    def _prune_speculation(self) -> None:
        """Drops the draft state of requests that stopped decoding (ended, aborted, retracted)."""
        if self._speculator is not None:
            self._speculator.prune({req.uid for req in self._running})

    def check_invariants(self) -> None:
        """Slot, row, scheduler and ownership accounting (raises on any leak)."""
        self._pool.check_invariants()
        self._prefill.check_invariants()
        self._table.check_invariants()
        self._running.check_invariants(self._decode.pending_uids)
        self._decode.check_invariants()
        self._loras.check_invariants()
        self._endings.sessions.check_invariants()
        if self._speculator is not None:
            self._speculator.check_invariants({req.uid for req in self._running})
