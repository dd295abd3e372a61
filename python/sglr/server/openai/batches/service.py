"""`BatchService`: the Files and Batch APIs of one server: its store (opened on first use, so a
server that never takes a file writes nothing), the runner, the bounds on what is stored, and
the batch transitions the routes ask for (create, cancel)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglr.envs import cache_dir
from sglr.errors import BodyTooLargeError, LimitExceededError
from sglr.http.errors import ApiError
from sglr.server.openai.batches.runner import AfterLine, BatchRunner, Execute, new_id
from sglr.server.openai.batches.store import BatchStore

_DB_NAME = "batches.sqlite3"
COMPLETION_WINDOW_S = 24 * 3600


def default_storage_dir(served_model_name: str) -> Path:
    """`<sglr cache>/batches/<served name>` (characters a path may not hold replaced)."""
    return cache_dir() / "batches" / re.sub(r"[^A-Za-z0-9._-]", "_", served_model_name)


@dataclass(frozen=True)
class BatchBounds:
    max_concurrency: int
    max_file_bytes: int
    max_storage_bytes: int


class BatchService:
    def __init__(self, root: Path, execute: Execute, bounds: BatchBounds) -> None:
        self.root = root
        self.execute = execute
        self.bounds = bounds
        self.after_line: AfterLine | None = None  # a test's hook: see `BatchRunner.after_line`
        self._store: BatchStore | None = None
        self._runner: BatchRunner | None = None

    def store(self, create: bool = False) -> BatchStore | None:
        """The store, opened on first use; None while there is none and `create` is false."""
        if self._store is None and (create or (self.root / _DB_NAME).exists()):
            self._store = BatchStore(self.root)
        return self._store

    @property
    def runner(self) -> BatchRunner:
        store = self.store(create=True)
        assert store is not None
        if self._runner is None:
            self._runner = BatchRunner(store, self.execute, self.bounds.max_concurrency)
        self._runner.after_line = self.after_line
        return self._runner

    def check_invariants(self) -> None:
        """The store's and the runner's (call it from the event loop thread, or while idle)."""
        if self._store is not None:
            self._store.check_invariants()
        if self._runner is not None:
            self._runner.check_invariants()

    async def start(self) -> None:
        """Resumes the batches a previous server on this store left unfinished."""
        store = self.store()
        if store is not None:
            for batch_id in store.unfinished_batches():
                self.runner.start(batch_id)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.stop()
        if self._store is not None:
            self._store.close()
            self._store = None
            self._runner = None

    def add_file(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        if len(data) > self.bounds.max_file_bytes:
            raise BodyTooLargeError(
                f"the file has {len(data)} bytes, over the server's limit of {self.bounds.max_file_bytes}",
                param="file",
                limit="batch_max_file_bytes",
            )
        store = self.store(create=True)
        assert store is not None
        if store.total_bytes() + len(data) > self.bounds.max_storage_bytes:
            raise LimitExceededError(
                f"the server's file storage is full (limit {self.bounds.max_storage_bytes} bytes); "
                "delete files to make room",
                param="file",
                limit="batch_max_storage_bytes",
            )
        return store.add_file(new_id("file-"), filename, purpose, data)

    def create_batch(
        self, input_file_id: str, endpoint: str, metadata: dict[str, str] | None
    ) -> dict[str, Any]:
        store = self.store()
        record = store.file(input_file_id) if store is not None else None
        if store is None or record is None:
            raise ApiError(404, f"no file with id {input_file_id!r}", "input_file_id")
        if record["purpose"] != "batch":
            raise ApiError.bad_request(
                f"file {input_file_id!r} has purpose {record['purpose']!r}, not 'batch'", "input_file_id"
            )
        now = int(time.time())
        doc = {
            "id": new_id("batch_"), "object": "batch", "endpoint": endpoint, "errors": None,
            "input_file_id": input_file_id, "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
            "expires_at": now + COMPLETION_WINDOW_S, "finalizing_at": None, "completed_at": None,
            "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": metadata,
        }  # fmt: skip
        store.add_batch(doc)
        self.runner.start(doc["id"])
        return doc

    def batch(self, batch_id: str) -> dict[str, Any]:
        store = self.store()
        doc = store.batch(batch_id) if store is not None else None
        if doc is None:
            raise ApiError(404, f"no batch with id {batch_id!r}", "batch_id")
        return doc

    def cancel(self, batch_id: str) -> dict[str, Any]:
        doc = self.batch(batch_id)
        if doc["status"] in ("cancelling", "cancelled"):
            return doc
        if doc["status"] not in ("validating", "in_progress"):
            raise ApiError(
                409, f"batch {batch_id!r} is {doc['status']}: it can no longer be cancelled", "batch_id"
            )
        doc.update(status="cancelling", cancelling_at=int(time.time()))
        store = self.store()
        assert store is not None
        store.save_batch(doc)
        self.runner.cancel(batch_id)
        return doc
