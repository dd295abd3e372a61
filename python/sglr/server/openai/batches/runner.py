"""`BatchRunner`: runs batches in the background of the server's event loop. A batch is read
and checked (validating), its pending lines run at most `max_concurrency` at a time across all
batches (in_progress; each line's result is recorded as it finishes), then its output and error
files are written (finalizing) and it is completed. A cancelled batch feeds no new line, its
lines in flight are aborted (cancelling their tasks aborts their requests in the engine), and
it ends cancelled with the results of the lines that had finished.

Stopping the runner, or a line answered while the server shuts down (`execute` returns None),
stops everything and records nothing more: a batch keeps its state, and the next server on the
same store resumes it with the lines still pending (`BatchService.start`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sglr.errors import InvariantError
from sglr.server.openai.batches.store import UNFINISHED, BatchStore
from sglr.server.openai.batches.validate import read_batch_input

logger = logging.getLogger("sglr.server")

# A line's (status code, JSON body); None: no answer to record (the line stays pending).
Execute = Callable[[str, dict[str, Any]], Awaitable[tuple[int, dict[str, Any]] | None]]
# Awaited after each line is recorded, with the batch id and the lines this runner ran so far.
AfterLine = Callable[[str, int], Awaitable[None]]


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


class BatchRunner:
    def __init__(self, store: BatchStore, execute: Execute, max_concurrency: int) -> None:
        self.store = store
        self.execute = execute
        self.slots = asyncio.Semaphore(max_concurrency)
        self.after_line: AfterLine | None = None
        self.num_lines_run = 0
        self._batch_tasks: dict[str, asyncio.Task[None]] = {}
        self._line_tasks: dict[str, set[asyncio.Task[None]]] = {}
        self._cancelled: set[str] = set()
        self._stopping = False

    def start(self, batch_id: str) -> None:
        task = asyncio.create_task(self._run(batch_id), name=f"sglr-batch-{batch_id}")
        self._batch_tasks[batch_id] = task
        task.add_done_callback(lambda _: self._batch_tasks.pop(batch_id, None))

    def cancel(self, batch_id: str) -> None:
        """After the batch was saved as cancelling: no new line, the ones in flight aborted."""
        self._cancelled.add(batch_id)
        for task in self._line_tasks.get(batch_id, ()):
            task.cancel()
        if batch_id not in self._batch_tasks:
            self.start(batch_id)  # nothing runs it (it was between runs): end it now

    def is_running(self, batch_id: str) -> bool:
        return batch_id in self._batch_tasks

    def check_invariants(self) -> None:
        """Lines run only for a batch being run; a batch being run is one the store has unfinished."""
        for batch_id in self._line_tasks:
            if batch_id not in self._batch_tasks:
                raise InvariantError(f"lines of batch {batch_id} run without their batch")
        for batch_id, task in self._batch_tasks.items():
            if task.done():  # ended; its done callback has not run yet
                continue
            doc = self.store.batch(batch_id)
            if doc is None or doc["status"] not in UNFINISHED:
                raise InvariantError(f"batch {batch_id} runs but is {doc and doc['status']}")

    async def stop(self) -> None:
        self._stopping = True
        tasks = [*self._batch_tasks.values(), *(t for lines in self._line_tasks.values() for t in lines)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, batch_id: str) -> None:
        try:
            doc = self.store.batch(batch_id)
            assert doc is not None
            if doc["status"] == "validating":
                await self._validate(doc)
            if self._status(batch_id) == "in_progress":
                await self._run_lines(doc)
            if self._stopping:  # the server shuts down: the next one goes on from here
                return
            status = self._status(batch_id)
            if status in ("in_progress", "finalizing"):
                self._finish(batch_id, "finalizing", "completed")
            elif status == "cancelling":
                self._finish(batch_id, "cancelling", "cancelled")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the store failed (disk full, ...): the batch cannot go on
            logger.exception("batch %s failed", batch_id)
            self._update(batch_id, status="failed", failed_at=_now(),
                         errors=_errors([{"code": "server_error", "message": str(exc), "param": None,
                                          "line": None}]))  # fmt: skip
        finally:
            self._cancelled.discard(batch_id)

    async def _validate(self, doc: dict[str, Any]) -> None:
        data = self.store.file_bytes(doc["input_file_id"])
        batch = await asyncio.to_thread(read_batch_input, data, doc["endpoint"])
        if self._status(doc["id"]) == "cancelling":
            return
        if batch.errors:
            self._update(doc["id"], status="failed", failed_at=_now(), errors=_errors(batch.errors))
            return
        self.store.add_lines(doc["id"], batch.lines)
        self._update(doc["id"], status="in_progress", in_progress_at=_now())

    async def _run_lines(self, doc: dict[str, Any]) -> None:
        batch_id = doc["id"]
        in_flight = self._line_tasks.setdefault(batch_id, set())
        try:
            for index, custom_id, body in self.store.pending_lines(batch_id):
                await self.slots.acquire()
                if batch_id in self._cancelled or self._stopping:
                    self.slots.release()
                    break
                task = asyncio.create_task(self._line(batch_id, doc["endpoint"], index, custom_id, body))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            while in_flight:
                await asyncio.wait(set(in_flight))
        finally:
            self._line_tasks.pop(batch_id, None)

    async def _line(self, batch_id: str, url: str, index: int, custom_id: str, body: dict[str, Any]) -> None:
        try:
            answer = await self.execute(url, body)
            if answer is None:  # the server shuts down: no more lines
                self._stopping = True
                return
            status, response = answer
            request_id = response.get("id") if isinstance(response.get("id"), str) else new_id("req_")
            result = {
                "id": new_id("batch_req_"),
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": request_id, "body": response},
                "error": None,
            }
            self.store.finish_line(batch_id, index, result, failed=status >= 400)
            self.num_lines_run += 1
            if self.after_line is not None:
                await self.after_line(batch_id, self.num_lines_run)
        finally:
            self.slots.release()

    def _finish(self, batch_id: str, passing: str, final: str) -> None:
        if passing == "finalizing":  # a cancelling batch has its time already
            self._update(batch_id, status=passing, finalizing_at=_now())
        outputs: dict[bool, list[bytes]] = {False: [], True: []}
        for result, failed in self.store.results(batch_id):
            outputs[failed].append(json.dumps(result, ensure_ascii=False).encode("utf-8"))
        ids = {}
        for failed, kind in ((False, "output"), (True, "error")):
            if outputs[failed]:
                file_id = new_id("file-")
                data = b"\n".join(outputs[failed]) + b"\n"
                self.store.add_file(file_id, f"{batch_id}_{kind}.jsonl", "batch_output", data)
                ids[f"{kind}_file_id"] = file_id
        self._update(batch_id, status=final, **{f"{final}_at": _now()}, **ids)

    def _status(self, batch_id: str) -> str:
        doc = self.store.batch(batch_id)
        assert doc is not None
        return doc["status"]

    def _update(self, batch_id: str, **fields: Any) -> None:
        # Read, change, save with no await between: a cancel saved meanwhile is never overwritten.
        doc = self.store.batch(batch_id)
        assert doc is not None
        doc.update(fields)
        self.store.save_batch(doc)


def _errors(data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "list", "data": data}


def _now() -> int:
    return int(time.time())
