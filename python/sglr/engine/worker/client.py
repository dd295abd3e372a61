"""`WorkerScheduler`: the scheduler as the front process sees it when it runs in workers.

It starts one worker process per tensor-parallel rank (`spawn`), waits until rank 0 is ready,
then stands in for the in-process `SchedulerLoop`: `submit` sends the tokenized request and
remembers its sink; a receiver thread hands each step's outputs to the sinks. The same thread
watches the workers: one that dies (or a scheduler that fails) ends every request in flight
with `WorkerError` and marks the engine dead, never a hang. `stop` drains and joins them all.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import zmq

from sglr.engine.finish import FinishAbort
from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits
from sglr.engine.output import OutputSink, push_all
from sglr.engine.request import TokenizedRequest
from sglr.engine.scheduler.handle import SchedulerHandle
from sglr.engine.scheduler.waiting_queue import WaitingRequest
from sglr.engine.token_output import TokenOutput
from sglr.engine.worker import messages
from sglr.engine.worker.ipc import Receiver, Sender
from sglr.engine.worker.launch import dist_init_method, start_worker
from sglr.engine.worker.runner_info import RunnerInfo
from sglr.engine.worker.spec import WorkerSpec
from sglr.errors import EngineClosedError, WorkerError

logger = logging.getLogger("sglr.engine")

_POLL_S = 0.2
_REPLY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_LATE_REASON_S = 2.0


class WorkerScheduler(SchedulerHandle):
    def __init__(
        self,
        engine_config: Any,
        runner_config: Any,
        max_running_requests: int,
        chunked_prefill_size: int,
        start_timeout_s: float,
    ) -> None:
        tp_size = engine_config.tp_size
        self._ipc_dir = tempfile.mkdtemp(prefix="sglr-ipc-")
        self._context = zmq.Context()
        self._commands = Sender(self._context, f"ipc://{self._ipc_dir}/commands", bind=True)
        self._outputs = Receiver(self._context, f"ipc://{self._ipc_dir}/outputs", bind=True)
        self._sinks: dict[int, OutputSink] = {}
        self._sinks_lock = threading.Lock()
        self._replies: dict[int, Future[Any]] = {}
        self._tokens = itertools.count()
        self._undelivered: list[TokenOutput] = []  # outputs read, not handed to sinks yet
        self._runner_info: RunnerInfo | None = None  # from rank 0's `Ready`
        self._start_failure: str | None = None  # from rank 0's `Failed` before `Ready`
        self._watchdog_timeout_s = engine_config.watchdog_timeout_s
        self._last_heard = time.monotonic()  # any message from rank 0
        self._progress = (-1, time.monotonic())  # (steps it reported, since when)
        self._fatal_error: WorkerError | None = None
        self._stopping = False
        self._closing = False
        dist_init = dist_init_method(engine_config) if tp_size > 1 else None
        # On CPU the ranks share the cores (a model-bound step wants all of them; the front's
        # work is small next to it).
        num_threads = max(1, (os.cpu_count() or 1) // engine_config.ranks_per_node)
        self._procs: list[subprocess.Popen[bytes]] = []
        # On a multi-node group this node runs its own ranks only (node 0: rank 0 onwards).
        for rank in engine_config.local_ranks:
            spec = WorkerSpec(
                rank=rank,
                tp_size=tp_size,
                parent_pid=os.getpid(),
                engine_config=engine_config,
                runner_config=runner_config,
                max_running_requests=max_running_requests,
                chunked_prefill_size=chunked_prefill_size,
                commands_endpoint=f"ipc://{self._ipc_dir}/commands",
                outputs_endpoint=f"ipc://{self._ipc_dir}/outputs",
                dist_init_method=dist_init,
                num_threads=num_threads,
            )
            self._procs.append(start_worker(spec))
        try:
            self.runner_info = self._wait_ready(start_timeout_s)
        except BaseException:
            self._kill_all()
            self._cleanup()
            raise
        self._last_heard = time.monotonic()
        self._progress = (-1, self._last_heard)
        self._receiver = threading.Thread(target=self._receive_loop, name="sglr-worker-outputs", daemon=True)
        self._receiver.start()

    # ----- the SchedulerHandle interface -----

    @property
    def is_alive(self) -> bool:
        alive = self._fatal_error is None and not self._stopping and not self._closing
        return alive and self._dead_worker() is None

    @property
    def fatal_error(self) -> BaseException | None:
        return self._fatal_error

    def submit(self, request: TokenizedRequest, sink: OutputSink) -> None:
        with self._sinks_lock:
            if self._fatal_error is not None:
                sink.push(_aborted(request.uid, self._fatal_error))
                return
            self._sinks[request.uid] = sink
        self._commands.send(messages.AddRequest(request), abandon=self._unreachable)

    def abort(self, rid: str) -> None:
        if self.is_alive:
            self._commands.send(messages.AbortRequest(rid), abandon=self._unreachable)

    def flush_cache(self) -> Future[bool]:
        return self._ask(messages.FlushCache)

    def load_lora(self, lora_id: int, name: str, path: str) -> Future[None]:
        return self._ask(lambda token: messages.LoadLora(token, lora_id, name, path))

    def unload_lora(self, lora_id: int) -> Future[bool]:
        return self._ask(lambda token: messages.UnloadLora(token, lora_id))

    def open_session(self, session_id: str) -> Future[None]:
        return self._ask(lambda token: messages.OpenSession(token, session_id))

    def close_session(self, session_id: str) -> Future[bool]:
        return self._ask(lambda token: messages.CloseSession(token, session_id))

    def get_stats(self) -> dict[str, Any]:
        return self._ask(messages.GetStats).result(timeout=_REPLY_TIMEOUT_S)

    def get_tree_summary(self, limits: TreeSummaryLimits) -> TreeSummary:
        return self._ask(lambda token: messages.GetTreeSummary(token, limits)).result(
            timeout=_REPLY_TIMEOUT_S
        )

    def get_waiting_queue(self, limit: int) -> Future[list[WaitingRequest]]:
        return self._ask(lambda token: messages.GetWaitingQueue(token, limit))

    def check_invariants(self) -> None:
        self._ask(messages.CheckInvariants).result(timeout=_REPLY_TIMEOUT_S)

    def stop(self, timeout: float | None = _STOP_TIMEOUT_S) -> None:
        """Asks rank 0 to stop (requests in flight end with `EngineClosedError`), waits for
        every worker, and kills any that does not exit in time."""
        if self._closing or self._stopping:
            return
        self._stopping = True  # workers that exit from now on are not failures
        if self._fatal_error is None and self._dead_worker() is None:
            # Never blocking: rank 0 may have died since the check (the waits below end it).
            self._commands.send(messages.StopWorkers(), block=False)
        deadline = time.monotonic() + (timeout or 0.0)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        self._closing = True
        self._kill_all()
        self._receiver.join(timeout=5.0)
        self._end_pending(EngineClosedError("the engine is shutting down"))
        self._cleanup()

    # ----- internals -----

    def _ask(self, query: Callable[[int], messages.Query]) -> Future[Any]:
        """Sends `query(token)`; the future gets rank 0's `Reply` with that token."""
        future: Future[Any] = Future()
        if not self.is_alive:
            future.set_exception(self._fatal_error or EngineClosedError("the engine has been shut down"))
            return future
        token = next(self._tokens)
        self._replies[token] = future
        if not self._commands.send(query(token), abandon=self._unreachable):
            # Rank 0 died with the query unsent; _fail may have ended the pending ones already.
            self._replies.pop(token, None)
            if not future.done():
                future.set_exception(self._fatal_error or EngineClosedError("the engine has been shut down"))
        return future

    def _wait_ready(self, timeout_s: float) -> RunnerInfo:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = self._outputs.receive(_POLL_S)
            if message is not None:
                self._handle(message)
            if self._runner_info is not None:
                return self._runner_info
            if self._start_failure is not None:
                raise WorkerError(f"the engine's worker failed to start: {self._start_failure}")
            dead = self._dead_worker()
            if dead is not None:
                # The reason rank 0 sent may still be on its way: it says more than an exit code.
                late = self._outputs.receive(_LATE_REASON_S)
                if late is not None:
                    self._handle(late)
                raise WorkerError(f"the engine's worker failed to start: {self._start_failure or dead}")
        raise WorkerError(f"the engine's workers were not ready within {timeout_s:.0f} s")

    def _receive_loop(self) -> None:
        while True:
            message = self._outputs.receive(_POLL_S)
            if message is None:
                if self._closing:
                    return
                dead = self._dead_worker()
                problem = f"died: {dead}" if dead is not None else self._hung_worker()
                if problem is not None and self._fatal_error is None and not self._stopping:
                    self._fail(f"the engine's worker {problem}")
                continue
            self._last_heard = time.monotonic()
            # Everything that has arrived goes out together: a front that fell behind catches
            # up with one hand-over per event loop, not one per step.
            while message is not None:
                self._handle(message)
                message = self._outputs.receive(0.0)
            self._dispatch()

    def _handle(self, message: messages.WorkerMessage) -> None:
        """The one place rank 0's messages are read. `Outputs` wait in `_undelivered` for
        `_dispatch`; anything else first hands over the outputs that came before it."""
        if type(message) is messages.Outputs:
            self._undelivered.extend(message.outputs)
            return
        self._dispatch()
        match message:
            case messages.Ready(runner_info):
                self._runner_info = runner_info
            case messages.Failed(reason):
                if self._runner_info is None:
                    self._start_failure = reason
                else:
                    self._fail(f"the engine's scheduler failed: {reason}")
            case messages.Reply(token, value):
                future = self._replies.pop(token, None)
                if future is not None:
                    if isinstance(value, BaseException):
                        future.set_exception(value)
                    else:
                        future.set_result(value)
            case messages.Heartbeat(num_steps, has_work):
                if num_steps != self._progress[0] or not has_work:
                    self._progress = (num_steps, time.monotonic())
                elif self._hung_worker() is not None and self._fatal_error is None and not self._stopping:
                    self._fail(f"the engine's worker {self._hung_worker()}")
            case messages.Stopped():
                self._closing = True  # rank 0 exits next: not a failure

    def _dispatch(self) -> None:
        """Hands the outputs read so far to their sinks."""
        if not self._undelivered:
            return
        outputs, self._undelivered = self._undelivered, []
        deliveries = []
        with self._sinks_lock:
            for out in outputs:
                sink = self._sinks.get(out.uid)
                if sink is None:
                    continue
                if out.finish_reason is not None:
                    del self._sinks[out.uid]
                deliveries.append((sink, out))
        push_all(deliveries)

    def _unreachable(self) -> bool:
        """True once rank 0 can no longer read commands: a send waiting for it gives up (a
        request already registered ends through `_fail`'s `_end_pending`)."""
        return self._fatal_error is not None or self._closing or self._dead_worker() is not None

    def _dead_worker(self) -> str | None:
        for rank, proc in enumerate(self._procs):
            code = proc.poll()
            if code is not None:
                return f"rank {rank} exited with code {code}"
        return None

    def _hung_worker(self) -> str | None:
        now, timeout = time.monotonic(), self._watchdog_timeout_s
        if now - self._last_heard > timeout:
            return f"hung: rank 0 sent nothing for {now - self._last_heard:.0f} s"
        if now - self._progress[1] > timeout:
            return f"hung: no scheduler step for {now - self._progress[1]:.0f} s while requests wait"
        return None

    def _fail(self, message: str) -> None:
        logger.error("%s; ending every request in flight", message)
        self._fatal_error = WorkerError(message)
        self._kill_all()
        self._end_pending(self._fatal_error)

    def _end_pending(self, error: EngineClosedError) -> None:
        with self._sinks_lock:
            sinks, self._sinks = self._sinks, {}
            for uid, sink in sinks.items():
                sink.push(_aborted(uid, error))
        replies, self._replies = self._replies, {}
        for future in replies.values():
            future.set_exception(error)

    def _kill_all(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)

    @property
    def worker_pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def _cleanup(self) -> None:
        self._commands.close()
        self._outputs.close()
        self._context.term()
        shutil.rmtree(self._ipc_dir, ignore_errors=True)


def _aborted(uid: int, error: EngineClosedError) -> TokenOutput:
    return TokenOutput(uid, [], 0, 0, 0, finish_reason=FinishAbort(error))
