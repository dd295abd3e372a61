"""What chat and completions streams share: chunks under one response header, with `usage` in
every chunk when `stream_options.include_usage` asks for it (null unless
`continuous_usage_stats`) and a last chunk holding only the usage."""

from __future__ import annotations

from typing import Any

from sglr.server.generation_response import DeltaRenderer
from sglr.server.openai_common import usage
from sglr.server.openai_request import OpenAIRequest


class OpenAIChunks(DeltaRenderer):
    """A route's subclass turns one delta into its choices (`choices_of`)."""

    def __init__(self, req: OpenAIRequest, kind: str) -> None:
        self.req = req
        self.header = req.header(kind)
        # Each sequence's counts as last reported, for `usage`.
        self.metas: list[dict[str, Any]] = [{} for _ in range(req.layout.num_sequences)]

    def choices_of(self, sequence: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def on_delta(self, delta: dict[str, Any]) -> list[Any]:
        sequence = delta["index"]
        self.metas[sequence] = {**self.metas[sequence], **delta["meta_info"]}
        return [self.chunk(choice) for choice in self.choices_of(sequence, delta)]

    def chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        payload = {**self.header, "choices": [choice]}
        options = self.req.options
        if options.include_usage:
            payload["usage"] = usage(self.metas, self.req.layout) if options.continuous_usage_stats else None
        return payload

    def closing(self) -> list[Any]:
        if not self.req.options.include_usage:
            return []
        return [{**self.header, "choices": [], "usage": usage(self.metas, self.req.layout)}]
