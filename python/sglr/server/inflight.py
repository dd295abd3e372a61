"""The request ids of the generations in flight through this server.

`/abort_request` with `abort_all` aborts them; a new request that reuses an id still in flight is
refused (an id must name one request, or aborting by id would hit the wrong one).
"""

from __future__ import annotations

from collections.abc import Iterable

from sglr.server.errors import ApiError


class InflightRequests:
    """Used from the event loop thread only (no locking)."""

    def __init__(self) -> None:
        self._rids: set[str] = set()

    def add(self, rids: list[str]) -> None:
        """Registers all of `rids` or none; 400 when one is already in flight."""
        busy = sorted(r for r in rids if r in self._rids)
        if busy:
            raise ApiError.bad_request(
                f"request id {busy[0]!r} is already in use by a running request", "rid"
            )
        self._rids.update(rids)

    def discard(self, rids: Iterable[str]) -> None:
        self._rids.difference_update(rids)

    def __contains__(self, rid: str) -> bool:
        return rid in self._rids

    def __len__(self) -> int:
        return len(self._rids)

    def snapshot(self) -> list[str]:
        return sorted(self._rids)
