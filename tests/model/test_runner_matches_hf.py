"""The runner against `transformers` on the same tiny checkpoints: greedy tokens identical,
logits within fp32 tolerance, prompt logprobs equal to the reference log_softmax. Covers
single and batched ragged requests, extend on a cached prefix, and chunked prefill."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from hf_twin import hf_greedy, hf_logits

from sglr.engine.kv import KVSlotAllocator
from sglr.engine.offline import generate_token_ids as generate
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import write_tiny_model

NUM_NEW = 12
LOGIT_ATOL = 1e-4


@lru_cache(maxsize=8)
def runner_for(path: Path, backend: str = "torch") -> ModelRunner:
    return ModelRunner(
        RunnerConfig(path, device="cpu", kv_num_tokens=8192, max_num_reqs=32, attention_backend=backend)
    )


def prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 4096, size=n).tolist() for n in lengths]


def text_prompt(path: Path) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    messages = [{"role": "user", "content": "Return a JSON list of three prime numbers."}]
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )


def test_single_request_greedy_matches_transformers(tiny_path: Path) -> None:
    runner = runner_for(tiny_path)
    for prompt in [text_prompt(tiny_path), *prompts(0, [1, 9])]:
        assert generate(runner, [prompt], NUM_NEW) == [hf_greedy(tiny_path, prompt, NUM_NEW)]


def test_batched_ragged_requests_match_transformers(tiny_path: Path) -> None:
    runner = runner_for(tiny_path)
    batch = prompts(1, [3, 30, 1, 17, 8, 45])
    lengths = [NUM_NEW, 3, NUM_NEW, 1, 7, NUM_NEW]  # requests leave the decode batch at different steps
    outputs = generate(runner, batch, lengths)
    assert outputs == [hf_greedy(tiny_path, p, n) for p, n in zip(batch, lengths, strict=True)]


@pytest.mark.parametrize("chunk", [1, 5, 16])
def test_chunked_prefill_matches_full_prefill(tiny_path: Path, chunk: int) -> None:
    runner = runner_for(tiny_path)
    batch = prompts(2, [37, 12, 4])
    expected = [hf_greedy(tiny_path, p, 6) for p in batch]
    assert generate(runner, batch, 6, prefill_chunk=chunk) == expected


def test_extend_on_cached_prefix_matches_full_prefill(tiny_path: Path) -> None:
    """Request B reuses request A's KV slots for a shared prefix and only computes its suffix."""
    runner = runner_for(tiny_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    shared, suffix = prompts(3, [21, 6])
    row_a, row_b = 1, 2  # the runner writes whole rows from each extend batch
    slots_a = allocator.try_alloc(len(shared))
    runner.forward(runner.extend_batch([ExtendRequest(row_a, np.array(shared), slots_a[:0], slots_a)]))
    slots_b = allocator.try_alloc(len(suffix))
    cached = ExtendRequest(row_b, np.array(suffix), slots_a, slots_b, logprob_start=len(shared))
    out = runner.forward(runner.extend_batch([cached]))
    reference = hf_logits(tiny_path, shared + suffix)
    torch.testing.assert_close(out.next_token_logits[0], reference[-1], atol=LOGIT_ATOL, rtol=0)
    expected = reference.log_softmax(-1)[len(shared) : -1].gather(1, torch.tensor(suffix[1:])[:, None])
    np.testing.assert_allclose(out.prompt_logprobs[0].logprobs, expected.squeeze(1).numpy(), atol=1e-4)


def test_decode_logits_match_transformers_at_every_step(tiny_path: Path) -> None:
    """Teacher-forced: the runner's decode logits equal the reference logits at each position."""
    runner = runner_for(tiny_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    sequence = prompts(4, [20])[0]
    reference = hf_logits(tiny_path, sequence)
    prefill_len = 8
    row = 1
    slots = allocator.try_alloc(prefill_len)
    out = runner.forward(
        runner.extend_batch([ExtendRequest(row, np.array(sequence[:prefill_len]), slots[:0], slots)])
    )
    logits = [out.next_token_logits[0]]
    for pos in range(prefill_len, len(sequence)):
        slot = allocator.try_alloc(1)
        out = runner.forward(runner.decode_batch([row], [sequence[pos]], [pos + 1], slot))
        logits.append(out.next_token_logits[0])
    torch.testing.assert_close(torch.stack(logits), reference[prefill_len - 1 :], atol=LOGIT_ATOL, rtol=0)


def test_prompt_logprobs_match_reference_log_softmax(tiny_path: Path) -> None:
    runner = runner_for(tiny_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    seq_a, seq_b = prompts(5, [15, 9])
    rows = [1, 2]
    slots_a, slots_b = allocator.try_alloc(len(seq_a)), allocator.try_alloc(len(seq_b))
    batch = runner.extend_batch(
        [
            ExtendRequest(
                rows[0], np.array(seq_a), slots_a[:0], slots_a, logprob_start=4, top_logprobs_num=5
            ),
            ExtendRequest(rows[1], np.array(seq_b), slots_b[:0], slots_b),
        ]
    )
    out = runner.forward(batch)
    assert out.prompt_logprobs[1] is None
    scored = out.prompt_logprobs[0]
    reference = hf_logits(tiny_path, seq_a).log_softmax(-1)[4:-1]  # positions 4 .. len-2
    assert scored.token_ids.tolist() == seq_a[5:]
    expected = reference.gather(1, torch.tensor(seq_a[5:])[:, None]).squeeze(1)
    np.testing.assert_allclose(scored.logprobs, expected.numpy(), atol=1e-4)
    top_vals, top_ids = reference.topk(5, dim=-1)
    np.testing.assert_allclose(scored.top_logprobs, top_vals.numpy(), atol=1e-4)
    assert (scored.top_ids == top_ids.numpy()).mean() > 0.95  # ids may swap on near-ties only


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tied_embeddings_llama3_rope_gqa4_sharded_checkpoint(tmp_path: Path, arch: str) -> None:
    path = write_tiny_model(
        tmp_path / arch, arch, seed=7, num_heads=8, num_kv_heads=2, hidden_size=64,
        tie_word_embeddings=True, llama3_rope_scaling=True, num_shards=3,
    )  # fmt: skip
    runner = ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=2048, max_num_reqs=4))
    batch = prompts(6, [300, 5])  # long enough that the stretched low frequencies matter
    assert generate(runner, batch, 6) == [hf_greedy(path, p, 6) for p in batch]


def test_triton_backend_runner_matches_transformers(tiny_path: Path) -> None:
    """The Triton kernels inside the full model (interpreted on CPU), extend + decode."""
    runner = runner_for(tiny_path, "triton")
    batch = prompts(8, [6, 11])
    assert generate(runner, batch, 4, prefill_chunk=4) == [hf_greedy(tiny_path, p, 4) for p in batch]


def test_llama2_style_multi_head_attention_from_a_bf16_checkpoint(tmp_path: Path) -> None:
    """No GQA (as Llama 2 7B), a bf16 checkpoint cast to fp32 at load, three layers."""
    path = write_tiny_model(
        tmp_path / "mha", "llama", seed=9, num_heads=4, num_kv_heads=4, num_layers=3, dtype="bfloat16"
    )
    runner = ModelRunner(
        RunnerConfig(path, device="cpu", dtype="float32", kv_num_tokens=1024, max_num_reqs=4)
    )
    batch = prompts(10, [13, 2])
    assert generate(runner, batch, 8) == [hf_greedy(path, p, 8) for p in batch]
