"""`TierWorker`: the thread that moves KV pages between memory and the page store.

The scheduler thread copies KV out of (or into) the device pool, which only it may touch; file
reads and writes, the slow part, run here. Requests come in as typed messages on one queue, in
order (a read queued after a write of the same page sees it); finished reads come back as
`PagesRead` on another, which the scheduler polls or waits on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from sglr.engine.kv.page_file import PageData
from sglr.engine.kv.page_store import PageStore

logger = logging.getLogger("sglr.engine")


@dataclass(frozen=True)
class WritePage:
    key: str
    seed: bytes
    token_ids: np.ndarray
    page: PageData


@dataclass(frozen=True)
class ReadPages:
    """Read `keys` in order, stopping at the first missing or bad page."""

    job_id: int
    seed: bytes
    keys: tuple[str, ...]
    token_ids: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class StopWorker:
    pass


@dataclass(frozen=True)
class PagesRead:
    job_id: int
    pages: tuple[PageData, ...]
    seconds: float


TierMessage = WritePage | ReadPages | StopWorker


class TierWorker:
    def __init__(self, store: PageStore) -> None:
        self.store = store
        # Keys whose writes are queued (the scheduler adds, this thread removes once written).
        self.queued_keys: set[str] = set()
        self.num_written_pages = 0
        self.num_written_bytes = 0
        self._inbox: queue.SimpleQueue[TierMessage] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[PagesRead] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sglr-kv-tier", daemon=True)
        self._thread.start()

    def submit(self, message: WritePage | ReadPages) -> None:
        self._inbox.put(message)

    def poll(self, timeout: float | None) -> PagesRead | None:
        """A finished read: at once (timeout 0), within `timeout` s, or waiting (None)."""
        try:
            if timeout == 0:
                return self._done.get_nowait()
            return self._done.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Finishes the writes queued so far, then ends the thread."""
        self._inbox.put(StopWorker())
        self._thread.join()

    def _run(self) -> None:
        while True:
            message = self._inbox.get()
            if isinstance(message, StopWorker):
                return
            try:
                if isinstance(message, WritePage):
                    self._write(message)
                else:
                    self._done.put(self._read(message))
            except Exception:  # a bug here must cost hits, never hang a step waiting for a read
                logger.exception("KV tier: a page transfer failed")
                if isinstance(message, ReadPages):
                    self._done.put(PagesRead(message.job_id, (), 0.0))

    def _write(self, message: WritePage) -> None:
        try:
            num_bytes = self.store.write(message.key, message.seed, message.token_ids, message.page)
        except OSError as exc:  # a full or failing disk costs hits, never the engine
            logger.warning("KV tier: cannot write page %s: %s", message.key, exc)
            return
        finally:
            self.queued_keys.discard(message.key)
        if num_bytes:
            self.num_written_pages += 1
            self.num_written_bytes += num_bytes

    def _read(self, message: ReadPages) -> PagesRead:
        started = time.perf_counter()
        pages = []
        for key, token_ids in zip(message.keys, message.token_ids, strict=True):
            try:
                page = self.store.read(key, message.seed, token_ids)
            except OSError as exc:
                logger.warning("KV tier: cannot read page %s: %s", key, exc)
                page = None
            if page is None:
                break
            pages.append(page)
        return PagesRead(message.job_id, tuple(pages), time.perf_counter() - started)
