"""`BatchStore`: the Files and Batch APIs' state on disk, one directory per server: file bytes
under `files/`, everything else in one SQLite database (`batches.sqlite3`): file records, batch
objects (OpenAI's JSON, as `retrieve` returns it) and each batch's lines, with a line's result
recorded when it finishes, so a restarted server runs only the lines still pending.

Used from the event loop thread only: each call is one short transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sglr.errors import InvariantError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lines (batch_id TEXT NOT NULL, line_index INTEGER NOT NULL,
    custom_id TEXT NOT NULL, request TEXT NOT NULL, result TEXT, failed INTEGER,
    PRIMARY KEY (batch_id, line_index));
"""
# The states a batch is still on its way out of (a restarted server picks these up again).
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
STATES = (*UNFINISHED, "completed", "failed", "cancelled", "expired")


class BatchStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files_dir = root / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(root / "batches.sqlite3", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses no committed line
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # -- files ---------------------------------------------------------------------------

    def total_bytes(self) -> int:
        return int(self.db.execute("SELECT COALESCE(SUM(bytes), 0) FROM files").fetchone()[0])

    def add_file(self, file_id: str, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        path = self.files_dir / file_id
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        os.replace(partial, path)  # a file is listed only once all of it is on disk
        created_at = int(time.time())
        self.db.execute(
            "INSERT INTO files (id, filename, purpose, bytes, created_at) VALUES (?, ?, ?, ?, ?)",
            (file_id, filename, purpose, len(data), created_at),
        )
        return _file_object(file_id, filename, purpose, len(data), created_at)

    def file(self, file_id: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT id, filename, purpose, bytes, created_at FROM files WHERE id = ?", (file_id,)
        ).fetchone()
        return _file_object(*row) if row is not None else None

    def files(self, purpose: str | None = None) -> list[dict[str, Any]]:
        """Newest first."""
        query = "SELECT id, filename, purpose, bytes, created_at FROM files"
        rows = self.db.execute(
            query + (" WHERE purpose = ?" if purpose else "") + " ORDER BY seq DESC",
            (purpose,) if purpose else (),
        )
        return [_file_object(*row) for row in rows]

    def file_bytes(self, file_id: str) -> bytes:
        return (self.files_dir / file_id).read_bytes()

    def delete_file(self, file_id: str) -> bool:
        deleted = self.db.execute("DELETE FROM files WHERE id = ?", (file_id,)).rowcount > 0
        if deleted:
            (self.files_dir / file_id).unlink(missing_ok=True)
        return deleted

    # -- batches -------------------------------------------------------------------------

    def add_batch(self, doc: dict[str, Any]) -> None:
        self.db.execute("INSERT INTO batches (id, doc) VALUES (?, ?)", (doc["id"], json.dumps(doc)))

    def save_batch(self, doc: dict[str, Any]) -> None:
        self.db.execute("UPDATE batches SET doc = ? WHERE id = ?", (json.dumps(doc), doc["id"]))

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT doc FROM batches WHERE id = ?", (batch_id,)).fetchone()
        return self._with_counts(json.loads(row[0])) if row is not None else None

    def batches(self, limit: int, after: str | None) -> tuple[list[dict[str, Any]], bool]:
        """Newest first, those created before batch `after` when given; and whether more follow."""
        if after is None:
            rows = self.db.execute("SELECT doc FROM batches ORDER BY seq DESC LIMIT ?", (limit + 1,))
        else:
            rows = self.db.execute(
                "SELECT doc FROM batches WHERE seq < (SELECT seq FROM batches WHERE id = ?) "
                "ORDER BY seq DESC LIMIT ?",
                (after, limit + 1),
            )
        docs = [self._with_counts(json.loads(doc)) for (doc,) in rows]
        return docs[:limit], len(docs) > limit

    def unfinished_batches(self) -> list[str]:
        return [d["id"] for d in (json.loads(doc) for (doc,) in self.db.execute(
            "SELECT doc FROM batches ORDER BY seq"
        )) if d["status"] in UNFINISHED]  # fmt: skip

    def _with_counts(self, doc: dict[str, Any]) -> dict[str, Any]:
        total, completed, failed = self.counts(doc["id"])
        if total:  # a batch that failed validation has no lines: its counts stay as saved
            doc["request_counts"] = {"total": total, "completed": completed, "failed": failed}
        return doc

    # -- lines ---------------------------------------------------------------------------

    def add_lines(self, batch_id: str, lines: list[tuple[str, dict[str, Any]]]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO lines (batch_id, line_index, custom_id, request) VALUES (?, ?, ?, ?)",
                [(batch_id, i, custom_id, json.dumps(body)) for i, (custom_id, body) in enumerate(lines)],
            )

    def pending_lines(self, batch_id: str) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self.db.execute(
            "SELECT line_index, custom_id, request FROM lines WHERE batch_id = ? AND result IS NULL "
            "ORDER BY line_index",
            (batch_id,),
        )
        return [(i, custom_id, json.loads(request)) for i, custom_id, request in rows]

    def finish_line(self, batch_id: str, line_index: int, result: dict[str, Any], failed: bool) -> None:
        self.db.execute(
            "UPDATE lines SET result = ?, failed = ? WHERE batch_id = ? AND line_index = ?",
            (json.dumps(result), int(failed), batch_id, line_index),
        )

    def results(self, batch_id: str) -> Iterator[tuple[dict[str, Any], bool]]:
        """The finished lines' results, in input order, and whether each failed."""
        rows = self.db.execute(
            "SELECT result, failed FROM lines WHERE batch_id = ? AND result IS NOT NULL ORDER BY line_index",
            (batch_id,),
        )
        for result, failed in rows:
            yield json.loads(result), bool(failed)

    def counts(self, batch_id: str) -> tuple[int, int, int]:
        """(total, completed, failed) lines of a batch."""
        total, completed, failed = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(failed = 0), 0), COALESCE(SUM(failed = 1), 0) FROM lines "
            "WHERE batch_id = ?",
            (batch_id,),
        ).fetchone()
        return int(total), int(completed), int(failed)

    def check_invariants(self) -> None:
        """Every file record has its bytes on disk and nothing else is there; every batch is in a
        known state, and a finished one has no line left pending."""
        records = {fid: size for fid, size in self.db.execute("SELECT id, bytes FROM files")}
        on_disk = {p.name: p.stat().st_size for p in self.files_dir.iterdir() if p.suffix != ".partial"}
        if records != on_disk:
            raise InvariantError(f"file records {records} disagree with the files on disk {on_disk}")
        for (doc,) in self.db.execute("SELECT doc FROM batches"):
            batch = json.loads(doc)
            if batch["status"] not in STATES:
                raise InvariantError(f"batch {batch['id']} is in an unknown state {batch['status']!r}")
            total, completed, failed = self.counts(batch["id"])
            if batch["status"] == "completed" and completed + failed != total:
                raise InvariantError(f"batch {batch['id']} completed with lines still pending")


def _file_object(file_id: str, filename: str, purpose: str, size: int, created_at: int) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": created_at,
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
    }
