"""Stored responses (`store: true`): SQLite, in memory unless `--responses-store-path` names a
file, bounded by count (`--max-stored-responses`; the oldest go first).

Each row keeps the Responses object as answered and the conversation's input items (those of
every response it continues, then its own): `previous_response_id` continues from them and the
stored output. Instructions are not kept with the input: OpenAI does not carry a previous
response's instructions over either.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sglr.errors import EngineConfigError, InvariantError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]

    def conversation(self) -> list[dict[str, Any]]:
        """The items a response continuing this one starts from: the input, then the output."""
        return [*self.input_items, *self.response.get("output", [])]


class ResponseStore:
    """Safe to use from any thread (one connection behind a lock; each call is short)."""

    def __init__(self, path: str | None, max_responses: int) -> None:
        if max_responses < 1:
            raise EngineConfigError(f"max_stored_responses must be at least 1, got {max_responses}")
        self.max_responses = max_responses
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path or ":memory:", check_same_thread=False, isolation_level=None)
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise EngineConfigError(f"responses store {path!r}: {exc}") from None
        self.num_evicted = 0

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
        """Stores (or replaces) `response`, then evicts the oldest beyond the bound."""
        row = (response["id"], json.dumps(response), json.dumps(input_items))
        with self._lock:
            self._db.execute("DELETE FROM responses WHERE id = ?", (response["id"],))
            self._db.execute("INSERT INTO responses (id, response, input_items) VALUES (?, ?, ?)", row)
            evicted = self._db.execute(
                "DELETE FROM responses WHERE seq NOT IN (SELECT seq FROM responses ORDER BY seq DESC LIMIT ?)",
                (self.max_responses,),
            ).rowcount
            self.num_evicted += max(evicted, 0)

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            row = self._db.execute(
                "SELECT response, input_items FROM responses WHERE id = ?", (response_id,)
            ).fetchone()
        if row is None:
            return None
        return StoredResponse(json.loads(row[0]), json.loads(row[1]))

    def delete(self, response_id: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def check_invariants(self) -> None:
        """At most `max_responses` rows, each a JSON response whose `id` is its key."""
        with self._lock:
            rows = self._db.execute("SELECT id, response, input_items FROM responses").fetchall()
        if len(rows) > self.max_responses:
            raise InvariantError(f"{len(rows)} stored responses, over the bound of {self.max_responses}")
        for response_id, response, input_items in rows:
            if json.loads(response).get("id") != response_id or not isinstance(json.loads(input_items), list):
                raise InvariantError(f"stored response {response_id!r} does not match its key")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class StoredResponsesGauge:
    """`sglr:num_stored_responses` and `sglr:num_evicted_responses_total`, read when scraped."""

    def __init__(self, store: ResponseStore, model_name: str) -> None:
        self.store = store
        self.model_name = model_name

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stored = GaugeMetricFamily(
            "sglr:num_stored_responses",
            "Responses kept for GET and previous_response_id",
            labels=["model_name"],
        )
        stored.add_metric([self.model_name], len(self.store))
        yield stored
        evicted = CounterMetricFamily(
            "sglr:num_evicted_responses", "Stored responses evicted by the bound", labels=["model_name"]
        )
        evicted.add_metric([self.model_name], self.store.num_evicted)
        yield evicted
