"""Stop strings over streamed text: found even when they span token boundaries, and never
half-emitted to a streaming client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StopMatch:
    stop: str
    start: int  # where the stop string begins in the text


class StopStringMatcher:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stops)
        self._longest = max((len(s) for s in self._stops), default=0)

    @property
    def is_empty(self) -> bool:
        return not self._stops

    def find(self, text: str, num_new_chars: int) -> StopMatch | None:
        """The earliest stop string in `text` that overlaps its last `num_new_chars` characters
        (earlier text was checked when it arrived)."""
        if not self._stops or num_new_chars <= 0:
            return None
        search_from = max(0, len(text) - num_new_chars - self._longest + 1)
        best: StopMatch | None = None
        for stop in self._stops:
            start = text.find(stop, search_from)
            if start >= 0 and (best is None or start < best.start):
                best = StopMatch(stop, start)
        return best

    def safe_len(self, text: str) -> int:
        """How much of `text` can be shown: all but a tail that might begin a stop string."""
        for held in range(min(len(text), self._longest - 1), 0, -1):
            tail = text[-held:]
            if any(stop.startswith(tail) for stop in self._stops):
                return len(text) - held
        return len(text)
