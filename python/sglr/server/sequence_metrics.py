"""One sequence's share of the server metrics: latencies as its tokens arrive, and at its end,
exactly once, the request counted by finish reason with its token counts and e2e latency.

A sequence ends with the delta that carries its finish reason or, when the server stops reading
first (the client went away, another sequence of the request failed), when its generation is
closed: it then counts as aborted, with the tokens reported so far (its prompt tokens are known
from the start: the front tokenized them). Either way it is counted
once, so `num_requests_total` agrees with the time-to-first-token and latency series.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sglr.server.metrics import ServerMetrics

_COUNT_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens")


class SequenceMetrics:
    def __init__(self, metrics: ServerMetrics, num_prompt_tokens: int = 0) -> None:
        self.metrics = metrics
        self.start = time.monotonic()
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.ended = False
        self._counts = dict.fromkeys(_COUNT_KEYS, 0)  # cumulative, as the last delta reported
        self._counts["prompt_tokens"] = num_prompt_tokens

    def on_delta(self, delta: dict[str, Any]) -> None:
        if self.ended:
            return
        self._on_tokens(len(delta.get("output_ids", ())))
        meta = delta.get("meta_info", {})
        for key in _COUNT_KEYS:
            if key in meta:
                self._counts[key] = meta[key]
        reason = meta.get("finish_reason")
        if reason is not None:
            self._end(reason.get("type", "unknown"))

    def on_close(self) -> None:
        """The generation was closed: a sequence that had not ended counts as aborted."""
        if not self.ended:
            self._end("abort")

    def _on_tokens(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        now = time.monotonic()
        name = self.metrics.model_name
        if self.last_token_at is None:
            self.first_token_at = self.last_token_at = now
            self.metrics.ttft.labels(name).observe(now - self.start)
            num_tokens -= 1  # the first token has no inter-token gap
        if num_tokens > 0:
            # Tokens that arrive together (jump-forward, or a stream reader that fell behind and
            # got one merged chunk) share the gap, so every token after the first is counted once.
            gap = (now - self.last_token_at) / num_tokens
            itl = self.metrics.itl.labels(name)
            for _ in range(num_tokens):
                itl.observe(gap)
        self.last_token_at = now

    def _end(self, finish_type: str) -> None:
        self.ended = True
        m = self.metrics
        name = m.model_name
        now = time.monotonic()
        m.num_requests.labels(name, finish_type).inc()
        m.prompt_tokens.labels(name).inc(self._counts["prompt_tokens"])
        completion = self._counts["completion_tokens"]
        m.generation_tokens.labels(name).inc(completion)
        m.cached_tokens.labels(name).inc(self._counts["cached_tokens"])
        m.e2e.labels(name).observe(now - self.start)
        if self.first_token_at is not None and completion > 1:
            m.tpot.labels(name).observe((now - self.first_token_at) / (completion - 1))
