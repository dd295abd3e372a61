"""`generate_token_ids`: greedy token ids for a fixed set of prompts, through the engine.

What the model tests and the CPU model benchmark run: the runner driven by the real engine
(scheduler, KV pool, batching, chunked prefill), with the prefix cache off so every prompt is
computed, and exactly `max_new_tokens` tokens per prompt (no stop tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from sglr.engine.engine import Engine
from sglr.model.runner import ModelRunner


def generate_token_ids(
    runner: ModelRunner,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int | Sequence[int],
    prefill_chunk: int | None = None,
) -> list[list[int]]:
    """Greedy ids for each prompt; `prefill_chunk` caps the prompt tokens run per step."""
    lengths = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    params = [{"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True} for n in lengths]
    engine = Engine.from_runner(
        runner,
        disable_radix_cache=True,
        max_running_requests=max(len(prompts), 1),
        chunked_prefill_size=prefill_chunk,
    )
    try:
        results = engine.generate(input_ids=[list(p) for p in prompts], sampling_params=params)
    finally:
        engine.shutdown()
    return [result["output_ids"] for result in results]
