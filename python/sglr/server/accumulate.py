"""Turning the engine's incremental stream chunks back into whole (cumulative) responses.

The engine streams deltas: new `text` and `output_ids`, new output logprob entries, and
`meta_info` whose other fields are current values (counts are cumulative). Adding the deltas of
one sequence up gives its full native response; SGLang's default stream mode sends that
cumulative form in every event.
"""

from __future__ import annotations

from typing import Any

from sglr.engine.assembler import INCREMENTAL_META_KEYS


class SequenceAccumulator:
    def __init__(self) -> None:
        self.text = ""
        self.output_ids: list[int] = []
        self.meta: dict[str, Any] = {}
        self._lists: dict[str, list[Any]] = {}

    @property
    def finish_reason(self) -> dict[str, Any] | None:
        return self.meta.get("finish_reason")

    def add(self, delta: dict[str, Any]) -> None:
        self.text += delta.get("text", "")
        self.output_ids.extend(delta.get("output_ids", ()))
        for key, value in delta.get("meta_info", {}).items():
            if key in INCREMENTAL_META_KEYS:
                self._lists.setdefault(key, []).extend(value)
            else:
                self.meta[key] = value

    def snapshot(self) -> dict[str, Any]:
        """The response so far, in the native non-stream layout. Lists are copied, so later
        `add` calls do not change a snapshot already handed out."""
        meta = dict(self.meta)
        for key, values in self._lists.items():
            meta[key] = list(values)
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": meta}
