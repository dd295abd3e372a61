"""Decoding the native API's streamed `/generate` responses (server-sent events)."""

from __future__ import annotations

import json
from typing import Any

from sglr.errors import BackendError


class StreamDecoder:
    """Turns native stream events into `(delta_text, meta_info)`.

    Servers send cumulative text by default and deltas with `--incremental-streaming-output`.
    An event is cumulative when its `output_ids` count equals `completion_tokens`, or (without
    ids) when its text extends the text so far. Output logprobs are accumulated so that the
    yielded meta_info always holds all of them.
    """

    def __init__(self) -> None:
        self.text = ""
        self.output_token_logprobs: list = []
        self.done = False  # the stream's end marker (`data: [DONE]`) has been read

    def feed_line(self, line: str) -> tuple[str, dict] | None:
        """One line of the server-sent event stream: `(delta_text, meta_info)` for an event,
        None for any other line (and from the end marker on, which sets `done`)."""
        if self.done or not line.startswith("data:"):
            return None
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return None
        return self.feed(json.loads(payload))

    def feed(self, event: dict[str, Any]) -> tuple[str, dict]:
        if "error" in event:
            error = event["error"]
            raise BackendError(f"/generate stream error: {error.get('message', error)}")
        text, meta = event.get("text", ""), dict(event.get("meta_info") or {})
        output_ids = event.get("output_ids")
        if output_ids is not None and "completion_tokens" in meta:
            cumulative = len(output_ids) == meta["completion_tokens"]
        else:
            cumulative = text.startswith(self.text)
        delta = text[len(self.text) :] if cumulative else text
        self.text += delta
        logprobs = meta.get("output_token_logprobs")
        if logprobs is not None:
            if cumulative:
                self.output_token_logprobs = list(logprobs)
            else:
                self.output_token_logprobs.extend(logprobs)
            meta["output_token_logprobs"] = list(self.output_token_logprobs)
        return delta, meta
