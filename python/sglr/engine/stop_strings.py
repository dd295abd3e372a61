"""Stop strings over streamed text: found even when they span token boundaries, and never
half-emitted to a streaming client. Stop regexes (`stop_regex`) end the text at their first
match; unlike stop strings, a streaming client may already have seen the start of a match."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sglr.engine.detokenizer import Decoder, IncrementalDetokenizer


@dataclass(frozen=True)
class StopMatch:
    stop: str  # the stop string, or the text a stop regex matched
    start: int  # where the match begins in the text
    end: int  # where it ends


class StopStringMatcher:
    def __init__(self, stops: Sequence[str], stop_regexes: Sequence[str] = ()) -> None:
        self._stops = tuple(stops)
        self._longest = max((len(s) for s in self._stops), default=0)
        self._regexes = tuple(re.compile(pattern) for pattern in stop_regexes)

    @property
    def is_empty(self) -> bool:
        return not self._stops and not self._regexes

    def find(self, text: str, num_new_chars: int) -> StopMatch | None:
        """The earliest stop string in `text` that overlaps its last `num_new_chars` characters
        (earlier text was checked when it arrived), or the earliest stop-regex match."""
        if num_new_chars <= 0:
            return None
        search_from = max(0, len(text) - num_new_chars - self._longest + 1)
        best: StopMatch | None = None
        for stop in self._stops:
            start = text.find(stop, search_from)
            if start >= 0 and (best is None or start < best.start):
                best = StopMatch(stop, start, start + len(stop))
        # NOTE: a regex match may begin anywhere, so regexes scan the whole text; any match is
        # new, because the text was scanned when it was shorter and generation did not stop.
        for regex in self._regexes:
            found = next((m for m in regex.finditer(text) if m.end() > m.start()), None)
            if found is not None and (best is None or found.start() < best.start):
                best = StopMatch(found.group(0), found.start(), found.end())
        return best

    def safe_len(self, text: str) -> int:
        """How much of `text` can be shown: all but a tail that might begin a stop string."""
        for held in range(min(len(text), self._longest - 1), 0, -1):
            tail = text[-held:]
            if any(stop.startswith(tail) for stop in self._stops):
                return len(text) - held
        return len(text)


class StopText:
    """A request's output text, decoded as tokens arrive, only to find its stop strings."""

    def __init__(self, tokenizer: Decoder, prompt_ids: Sequence[int], params: Any) -> None:
        self._detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids, params.skip_special_tokens)
        self._matcher = StopStringMatcher(params.stop, params.stop_regex)
        self._no_stop_trim = params.no_stop_trim
        self.text = ""

    def append(self, token_id: int, can_stop: bool) -> StopMatch | None:
        """Decodes one more token; the stop string it completed, if any (and `can_stop`)."""
        new_text = self._detokenizer.append([token_id])
        self.text += new_text
        if not can_stop or not new_text:
            return None
        return self._matcher.find(self.text, len(new_text))

    def end_of(self, match: StopMatch) -> int:
        """Where the final text ends: before the stop string, or after it with `no_stop_trim`."""
        return match.end if self._no_stop_trim else match.start
