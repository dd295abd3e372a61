"""`RecordingEngine`: an `Engine` stand-in that remembers what every request sent and got back.

The optimal hit rate (`benchlib.hit_rate`) needs the token ids of every request a run sent:
generations, prefix hints and `select` scoring alike. Programs reach the engine through
`EngineBackend`, which only calls `generate` (and reads a few attributes); this proxy forwards
everything and keeps (prompt, output ids) for each request. Text prompts are kept as text and
tokenized in `take_requests` (after the timed run) with the engine's own tokenizer, as the engine
tokenized them.
"""

from __future__ import annotations

import threading
from typing import Any


class RecordingEngine:
    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        # (text or token ids, output ids) per request, in completion order.
        self._requests: list[tuple[str | list[int], list[int]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        **kwargs: Any,
    ) -> Any:
        if kwargs.get("stream"):
            raise NotImplementedError("the benchmark programs do not stream; recording needs whole results")
        results = self._engine.generate(
            prompt=prompt, sampling_params=sampling_params, input_ids=input_ids, **kwargs
        )
        prompts = _prompt_list(prompt, input_ids)
        outputs = results if isinstance(results, list) else [results]
        # n > 1 gives n results per prompt, prompt by prompt.
        per_prompt = len(outputs) // len(prompts)
        pairs = [(prompts[i // per_prompt], list(out["output_ids"])) for i, out in enumerate(outputs)]
        with self._lock:
            self._requests.extend(pairs)
        return results

    def take_requests(self) -> list[tuple[list[int], list[int]]]:
        """(prompt ids, output ids) of every request since the last call; clears the record."""
        with self._lock:
            requests, self._requests = self._requests, []
        encode = self._engine.tokenizer.encode
        return [(encode(p) if isinstance(p, str) else p, out) for p, out in requests]


def _prompt_list(prompt: Any, input_ids: Any) -> list[str | list[int]]:
    if prompt is not None:
        return [prompt] if isinstance(prompt, str) else list(prompt)
    if input_ids and isinstance(input_ids[0], int):
        return [list(input_ids)]
    return [list(ids) for ids in input_ids]
