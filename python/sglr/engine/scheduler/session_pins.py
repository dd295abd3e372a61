"""`SessionPins`: each open session's lock on the prefix cache (the scheduler's side of
`engine/sessions.py`).

When a request of an open session finishes, the KV it computed (prompt + output) is in the
cache; the session locks the node where it ends, releasing its previous one, so the next turn's
shared prefix cannot be evicted meanwhile. Closing the session releases its lock (the KV stays
cached, evictable); flushing the cache releases them all (the sessions stay open, their next
turns recompute). A session closed before its request ends pins nothing.
"""

from __future__ import annotations

import numpy as np

from sglr.engine.kv import KVPool


class SessionPins:
    def __init__(self, pool: KVPool) -> None:
        self._pool = pool
        self._nodes: dict[str, int | None] = {}  # the open sessions' locked nodes (None: none yet)

    def __len__(self) -> int:
        return len(self._nodes)

    def open(self, session_id: str) -> None:
        self._nodes.setdefault(session_id, None)

    def close(self, session_id: str) -> bool:
        """False when the session was not open."""
        if session_id not in self._nodes:
            return False
        self._pool.index.unlock(self._nodes.pop(session_id))
        return True

    def on_finished(self, session_id: str | None, keys: np.ndarray, namespace: str | None) -> None:
        """A request of `session_id` finished and its KV of `keys` went into the cache."""
        if session_id not in self._nodes:
            return
        _, node = self._pool.index.match(keys, namespace)
        self._pool.index.lock(node)  # before the unlock: the new node may lie under the old one
        self._pool.index.unlock(self._nodes[session_id])
        self._nodes[session_id] = node

    def release_all(self) -> None:
        """Before the cache is dropped: no session holds anything."""
        for session_id, node in self._nodes.items():
            self._pool.index.unlock(node)
            self._nodes[session_id] = None

    def check_invariants(self) -> None:
        """A session locks a node only where the cache keeps anything."""
        assert self._pool.reuses_kv or all(node is None for node in self._nodes.values()), (
            "a session pins KV in an engine without a prefix cache"
        )
