"""`SchedulerHandle`: the scheduler as the engine's front sees it, wherever it runs.

Two implementations: `SchedulerLoop` (`loop.py`, the scheduler thread in this process) and
`WorkerScheduler` (`engine/worker/client.py`, the scheduler in a worker process, over IPC).
`Engine` and `delivery.py` use only what is declared here. Every method may be called from any
thread; outputs reach each request's sink on the scheduler's (or the IPC receiver's) thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from typing import Any

from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits
from sglr.engine.output import OutputSink
from sglr.engine.request import TokenizedRequest
from sglr.engine.scheduler.waiting_queue import WaitingRequest


class SchedulerHandle(ABC):
    @property
    @abstractmethod
    def is_alive(self) -> bool:
        """Accepting requests: started and not stopped, and nothing fatal happened."""

    @property
    @abstractmethod
    def fatal_error(self) -> BaseException | None:
        """What stopped the scheduler, when something did."""

    @property
    @abstractmethod
    def worker_pids(self) -> list[int]:
        """The worker processes' ids (empty when the scheduler runs in this process)."""

    @abstractmethod
    def submit(self, request: TokenizedRequest, sink: OutputSink) -> None:
        """Queues a request; its `TokenOutput`s go to `sink`, the last with its finish reason."""

    @abstractmethod
    def abort(self, rid: str) -> None:
        """Ends request `rid` early (a no-op when it has finished)."""

    @abstractmethod
    def flush_cache(self) -> Future[bool]:
        """Drops the prefix cache; False while requests are in flight."""

    @abstractmethod
    def load_lora(self, lora_id: int, name: str, path: str) -> Future[None]:
        """Loads the PEFT adapter at `path` as `lora_id` on every rank, between steps."""

    @abstractmethod
    def unload_lora(self, lora_id: int) -> Future[bool]:
        """Unloads adapter `lora_id` (True), or marks it to unload when its requests end (False)."""

    @abstractmethod
    def open_session(self, session_id: str) -> Future[None]:
        """Starts keeping the KV of session `session_id`'s requests (`scheduler/session_pins.py`)."""

    @abstractmethod
    def close_session(self, session_id: str) -> Future[bool]:
        """Stops keeping it; False when the session was not open."""

    @abstractmethod
    def get_stats(self) -> dict[str, Any]:
        """The engine's counters, KV usage and queue lengths."""

    @abstractmethod
    def get_tree_summary(self, limits: TreeSummaryLimits) -> TreeSummary:
        """A bounded summary of the prefix cache (`engine/kv/tree_summary.py`)."""

    @abstractmethod
    def get_waiting_queue(self, limit: int) -> Future[list[WaitingRequest]]:
        """The first `limit` waiting requests in admission order (`scheduler/waiting_queue.py`)."""

    @abstractmethod
    def check_invariants(self) -> None:
        """KV and scheduler accounting (raises on any leak)."""

    @abstractmethod
    def stop(self, timeout: float | None = 30.0) -> None:
        """Ends every request in flight with `EngineClosedError` and stops."""
