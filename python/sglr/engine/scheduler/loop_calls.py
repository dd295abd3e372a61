"""`LoopCalls`: the scheduler handle's requests that `SchedulerLoop`'s thread answers between
steps, each through `call`: flushing the prefix cache, loading and unloading LoRA adapters,
opening and closing sessions (their KV pins, `session_pins.py`), the waiting queue's view."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sglr.engine.kv import KVPool
from sglr.engine.scheduler.endings import RequestEndings
from sglr.engine.scheduler.handle import SchedulerHandle
from sglr.engine.scheduler.lora_lifecycle import LoraLifecycle
from sglr.engine.scheduler.prefill import PrefillQueue
from sglr.engine.scheduler.table import RequestTable
from sglr.engine.scheduler.waiting_queue import WaitingRequest


class LoopCalls(SchedulerHandle):
    # The loop's owners (`SchedulerLoop.__init__`).
    _pool: KVPool
    _table: RequestTable
    _loras: LoraLifecycle
    _endings: RequestEndings
    _prefill: PrefillQueue

    @abstractmethod
    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Runs `fn` on the loop thread between steps; its result or error in the future."""

    def flush_cache(self) -> Future[bool]:
        return self.call(self._flush_cache)

    def load_lora(self, lora_id: int, name: str, path: str) -> Future[None]:
        return self.call(lambda: self._loras.load(lora_id, name, path))

    def unload_lora(self, lora_id: int) -> Future[bool]:
        return self.call(lambda: self._loras.unload(lora_id))

    def open_session(self, session_id: str) -> Future[None]:
        return self.call(lambda: self._endings.sessions.open(session_id))

    def close_session(self, session_id: str) -> Future[bool]:
        return self.call(lambda: self._endings.sessions.close(session_id))

    def get_waiting_queue(self, limit: int) -> Future[list[WaitingRequest]]:
        return self.call(lambda: self._prefill.waiting_queue(limit))

    def _flush_cache(self) -> bool:
        """Drops the whole prefix cache (and the sessions' pins on it); refused (False) while
        requests are in flight."""
        if self._table:
            return False
        self._endings.sessions.release_all()
        self._pool.reset()
        return True
