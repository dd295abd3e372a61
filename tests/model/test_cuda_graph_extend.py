"""Extend CUDA graphs: the buckets and padding (CPU, torch and Triton-interpreter backends) and,
on a GPU, graph replay against the eager extend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sglr.errors import ModelConfigError
from sglr.model.cuda_graph_extend import can_graph_extend
from sglr.model.extend_padding import bucket_for, pad_extend, pad_requests, token_buckets
from sglr.model.forward_batch import ExtendRequest
from sglr.model.kv_cache import PADDING_SLOT
from sglr.model.req_to_token import PADDING_ROW
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.model.runner_graphs import ModelSteps
from sglr.testing.tiny import tiny_model_path


def test_token_buckets_double_from_16_and_end_at_the_maximum() -> None:
    assert token_buckets(64) == [16, 32, 64]
    assert token_buckets(48) == [16, 32, 48]
    assert token_buckets(8) == [8]
    assert token_buckets(0) == []
    buckets = token_buckets(64)
    assert [bucket_for(buckets, n) for n in (1, 16, 17, 33, 64, 65)] == [16, 16, 32, 64, 64, None]


def test_padding_keeps_real_requests_and_gives_the_rest_to_one_padding_request() -> None:
    padded = pad_requests(
        np.array([7, 3]), np.array([10, 0]), np.array([5, 2]), num_tokens=16, num_req_slots=5
    )
    assert padded.req_rows.tolist() == [7, 3, PADDING_ROW, PADDING_ROW, PADDING_ROW]
    assert padded.prefix_lens.tolist() == [10, 0, 0, 0, 0]
    assert padded.extend_lens.tolist() == [5, 2, 9, 0, 0]  # 9 padding tokens, then empty requests
    assert padded.extend_starts.tolist() == [0, 5, 7, 16, 16]
    assert padded.seq_lens.tolist() == [15, 2, 9, 0, 0]
    assert padded.last_token_ids.tolist() == [4, 6, 15, 0, 0]
    assert padded.stacked().shape == (6, 5)
    full = pad_requests(np.array([1]), np.array([0]), np.array([16]), num_tokens=16, num_req_slots=2)
    assert full.extend_lens.tolist() == [16, 0]  # nothing to pad: the padding request is empty
    with pytest.raises(ValueError, match="do not fit"):
        pad_requests(np.array([1, 2]), np.array([0, 0]), np.array([1, 1]), num_tokens=16, num_req_slots=2)
    with pytest.raises(ValueError, match="do not fit"):
        pad_requests(np.array([1]), np.array([0]), np.array([17]), num_tokens=16, num_req_slots=2)


def cpu_runner(backend: str, **options) -> ModelRunner:
    return ModelRunner(
        RunnerConfig(
            tiny_model_path("llama"), device="cpu", dtype="float32", kv_num_tokens=512, max_num_reqs=8,
            attention_backend=backend, **options,
        )
    )  # fmt: skip


def two_step_batches(runner: ModelRunner, new_lens: tuple[int, ...]):
    """Prompts prefilled (rows 1.., slots from 1), then the extend batch under test: `new_lens`
    tokens on top of each cached prompt (a jump-forward run's shape)."""
    rng = np.random.default_rng(0)
    prompt_lens = [9, 23, 4][: len(new_lens)]
    next_slot, prompts, extends = 1, [], []
    for row, (prompt_len, new_len) in enumerate(zip(prompt_lens, new_lens, strict=True), start=1):
        slots = np.arange(next_slot, next_slot + prompt_len + new_len, dtype=np.int32)
        next_slot += prompt_len + new_len
        ids = rng.integers(3, 4000, size=prompt_len + new_len)
        prompts.append(ExtendRequest(row, ids[:prompt_len], slots[:0], slots[:prompt_len]))
        extends.append(ExtendRequest(row, ids[prompt_len:], slots[:prompt_len], slots[prompt_len:]))
    return runner.extend_batch(prompts), runner.extend_batch(extends)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_a_padded_extend_gives_the_unpadded_logits_on_real_rows(backend: str) -> None:
    runner = cpu_runner(backend)
    prefill, batch = two_step_batches(runner, (5, 1, 7))
    runner.forward(prefill)
    expected = runner.forward(batch).next_token_logits.clone()
    padded = pad_extend(batch, num_tokens=32, num_req_slots=5)
    assert padded.out_cache_slots[batch.num_tokens :].eq(PADDING_SLOT).all()
    steps = ModelSteps(runner.model, runner.attn)
    with torch.inference_mode():
        logits = steps.logits_at(padded.input_ids, padded.positions, padded.metadata(), padded.last_token_ids)
    assert logits.shape[0] == 5
    # The same kernels over the same rows: padding changes no real row's arithmetic.
    torch.testing.assert_close(logits[:3], expected, rtol=1e-5, atol=1e-5)


def test_only_plain_small_extends_can_replay_a_graph() -> None:
    runner = cpu_runner("torch")
    prefill, batch = two_step_batches(runner, (5, 1, 7))
    assert can_graph_extend(batch, max_tokens=16, max_reqs=4)
    assert not can_graph_extend(batch, max_tokens=8, max_reqs=4)  # 13 tokens
    assert not can_graph_extend(batch, max_tokens=16, max_reqs=2)  # 3 requests
    assert can_graph_extend(prefill, max_tokens=64, max_reqs=4)
    decode = runner.decode_batch([1], [5], [15], [60])
    assert not can_graph_extend(decode, max_tokens=64, max_reqs=4)
    slots = np.arange(100, 104, dtype=np.int32)
    logprobs = runner.extend_batch([ExtendRequest(5, np.arange(3, 7), slots[:0], slots, logprob_start=0)])
    assert not can_graph_extend(logprobs, max_tokens=64, max_reqs=4)


def test_extend_graph_options_are_checked_and_ignored_off_cuda() -> None:
    with pytest.raises(ModelConfigError, match="cuda_graph_extend"):
        RunnerConfig(None, cuda_graph_extend_max_tokens=-1)
    runner = cpu_runner("triton", cuda_graph_extend_max_tokens=64)
    assert runner.extend_graphs is None and runner.cuda_graphs is None


def gpu_runner(path: Path, extend_tokens: int) -> ModelRunner:
    return ModelRunner(
        RunnerConfig(
            path, device="cuda", dtype="float32", kv_num_tokens=4096, max_num_reqs=16,
            attention_backend="triton", cuda_graph_max_bs=8, cuda_graph_extend_max_tokens=extend_tokens,
        )
    )  # fmt: skip


@pytest.mark.gpu
def test_extend_graph_replay_equals_eager_extend() -> None:
    path = tiny_model_path("llama")
    eager, graphed = gpu_runner(path, 0), gpu_runner(path, 64)
    assert eager.extend_graphs is None and graphed.extend_graphs is not None
    assert graphed.extend_graphs.token_buckets == [16, 32, 64]
    replayed: list[int] = []
    replay = graphed.extend_graphs.replay
    graphed.extend_graphs.replay = lambda batch: replayed.append(batch.num_tokens) or replay(batch)
    for new_lens in ((5, 1, 7), (16,), (30, 2), (40, 20, 3)):  # buckets 16, 16, 32, 64
        logits = []
        for runner in (eager, graphed):
            prefill, batch = two_step_batches(runner, new_lens)
            runner.forward(prefill)
            logits.append(runner.forward(batch).next_token_logits.clone())
        # fp32 on both sides, the same kernels: only the launch differs.
        torch.testing.assert_close(logits[1], logits[0], rtol=1e-5, atol=1e-5)
    # Every prefill (36 tokens at most) and every extend ran a graph.
    assert replayed == [36, 13, 9, 16, 32, 32, 36, 63]
