"""Turning the engine's incremental stream chunks back into whole (cumulative) responses.

The engine streams deltas: new `text` and `output_ids`, new output logprob entries, and
`meta_info` whose other fields are current values (counts are cumulative). Adding the deltas of
one sequence up gives its full native response; SGLang's default stream mode sends that
cumulative form in every event.
"""

from __future__ import annotations

from typing import Any

from sglr.engine.assembler import INCREMENTAL_META_KEYS
from sglr.http.jsonout import dumps


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
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": self._meta_snapshot()}

    def _meta_snapshot(self) -> dict[str, Any]:
        meta = dict(self.meta)
        for key, values in self._lists.items():
            meta[key] = list(values)
        return meta


class EncodedAccumulator(SequenceAccumulator):
    """A `SequenceAccumulator` that keeps its text and ids as JSON too, extended as deltas
    arrive: a stream that sends the whole response in every event encodes only what is new of
    them (their share of the encoding grew with the response, quadratic over a stream)."""

    def __init__(self) -> None:
        super().__init__()
        self._text_json = b""  # JSON-escaped, without the quotes
        self._ids_json = b""  # comma-separated

    def add(self, delta: dict[str, Any]) -> None:
        super().add(delta)
        text = delta.get("text")
        if text:
            # JSON escapes character by character: the escaped whole is the escaped parts joined.
            self._text_json += dumps(text)[1:-1]
        ids = delta.get("output_ids")
        if ids:
            new = ",".join(map(str, ids)).encode()
            self._ids_json = self._ids_json + b"," + new if self._ids_json else new

    def snapshot_json(self, index: int | None = None) -> bytes:
        """`dumps(snapshot())`, with `"index": index` after the rest when given."""
        parts = [
            b'{"text":"', self._text_json, b'","output_ids":[', self._ids_json,
            b'],"meta_info":', dumps(self._meta_snapshot()),
        ]  # fmt: skip
        if index is not None:
            parts.append(b',"index":%d' % index)
        parts.append(b"}")
        return b"".join(parts)
