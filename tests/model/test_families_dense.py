"""Mistral, Gemma 2, Gemma 3 and Phi-3 against `transformers` on tiny random checkpoints: greedy
tokens identical and logits within fp32 tolerance, alone, batched (ragged), on a cached prefix
longer than the sliding window, and through the engine's radix cache."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from dense_families import VOCAB_SIZE, WINDOW, write_family_checkpoint
from hf_twin import hf_greedy, hf_logits

from sglr.engine.engine import Engine
from sglr.engine.kv import KVSlotAllocator
from sglr.engine.offline import generate_token_ids as generate
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig

FAMILIES = ["mistral", "gemma2", "gemma3", "phi3", "qwen2"]
WINDOWED = ["mistral", "gemma2", "gemma3", "qwen2"]
LOGIT_ATOL = 1e-4
NUM_NEW = 14


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dense")
    return {family: write_family_checkpoint(root / family, family) for family in FAMILIES}


@lru_cache(maxsize=8)
def runner_for(path: Path, backend: str = "torch") -> ModelRunner:
    return ModelRunner(
        RunnerConfig(path, device="cpu", kv_num_tokens=4096, max_num_reqs=16, attention_backend=backend)
    )


def prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB_SIZE, size=n).tolist() for n in lengths]


@pytest.mark.parametrize("family", FAMILIES)
def test_single_request_greedy_matches_transformers(checkpoints, family) -> None:
    path = checkpoints[family]
    runner = runner_for(path)
    for prompt in prompts(0, [1, 27]):  # 27 + 14 tokens: well past the window of 8
        assert generate(runner, [prompt], NUM_NEW) == [hf_greedy(path, prompt, NUM_NEW)]


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_ragged_requests_match_transformers(checkpoints, family) -> None:
    path = checkpoints[family]
    batch = prompts(1, [3, 30, 12, 7])
    lengths = [NUM_NEW, 4, NUM_NEW, 9]  # requests leave the decode batch at different steps
    outputs = generate(runner_for(path), batch, lengths, prefill_chunk=11)
    assert outputs == [hf_greedy(path, p, n) for p, n in zip(batch, lengths, strict=True)]


@pytest.mark.parametrize("family", FAMILIES)
def test_extend_on_cached_prefix_then_decode_logits_match(checkpoints, family) -> None:
    """B reuses A's KV for a shared prefix longer than the window, computes only its suffix, then
    decodes teacher-forced; every logit row equals the reference at the same position."""
    path = checkpoints[family]
    runner = runner_for(path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    shared, suffix, tail = prompts(3, [21, 6, 7])
    slots_a = allocator.try_alloc(len(shared))
    runner.forward(runner.extend_batch([ExtendRequest(1, np.array(shared), slots_a[:0], slots_a)]))
    slots_b = allocator.try_alloc(len(suffix))
    out = runner.forward(runner.extend_batch([ExtendRequest(2, np.array(suffix), slots_a, slots_b)]))
    logits = [out.next_token_logits[0]]
    sequence = shared + suffix + tail
    for pos in range(len(shared) + len(suffix), len(sequence)):
        slot = allocator.try_alloc(1)
        logits.append(
            runner.forward(runner.decode_batch([2], [sequence[pos]], [pos + 1], slot)).next_token_logits[0]
        )
    reference = hf_logits(path, sequence)
    start = len(shared) + len(suffix) - 1
    torch.testing.assert_close(torch.stack(logits), reference[start:], atol=LOGIT_ATOL, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_radix_cache_hit_matches_transformers(checkpoints, family) -> None:
    """Through the engine with the prefix cache on: the second request reuses more cached tokens
    than the window holds, and still generates what `transformers` does from scratch."""
    path = checkpoints[family]
    first, suffix = prompts(4, [26, 5])
    second = first[:22] + suffix
    engine = Engine.from_runner(runner_for(path), disable_radix_cache=False, max_running_requests=4)
    params = {"max_new_tokens": NUM_NEW, "temperature": 0.0, "ignore_eos": True}
    try:
        engine.generate(input_ids=first, sampling_params=params)
        result = engine.generate(input_ids=second, sampling_params=params)
    finally:
        engine.shutdown()
    assert result["meta_info"]["cached_tokens"] > WINDOW
    assert result["output_ids"] == hf_greedy(path, second, NUM_NEW)


@pytest.mark.parametrize("family", ["mistral", "gemma2"])
def test_triton_backend_matches_transformers(checkpoints, family) -> None:
    """The interpreted Triton kernels with windows (and Gemma 2's soft-cap), extend + decode."""
    path = checkpoints[family]
    batch = prompts(5, [6, 19])
    outputs = generate(runner_for(path, "triton"), batch, 10, prefill_chunk=7)
    assert outputs == [hf_greedy(path, p, 10) for p in batch]


@pytest.mark.parametrize("family", WINDOWED)
def test_the_window_matters_in_these_tests(checkpoints, tmp_path, family) -> None:
    """Control: without the window the reference differs, so the tests above would notice a
    backend that ignored it."""
    sequence = prompts(3, [34])[0]
    unwindowed = write_family_checkpoint(tmp_path / family, family, sliding_window=1000)
    with_window, without = hf_logits(checkpoints[family], sequence), hf_logits(unwindowed, sequence)
    assert torch.equal(with_window[:WINDOW], without[:WINDOW])  # same weights
    assert (with_window[-1] - without[-1]).abs().max() > 1e-2
