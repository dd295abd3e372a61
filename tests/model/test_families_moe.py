"""Qwen3, Mixtral, Qwen2-MoE and Qwen3-MoE against `transformers` on tiny checkpoints it wrote:
greedy tokens identical alone and batched (ragged prompts, requests leaving the decode batch at
different steps), logits within fp32 tolerance at every decode step and after an extend on a
cached prefix, and an engine whose radix cache hits gives the same tokens."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from hf_twin import hf_greedy, hf_logits

from sglr.engine.engine import Engine
from sglr.engine.kv import KVSlotAllocator
from sglr.engine.offline import generate_token_ids as generate
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny_families import FAMILIES, write_family_checkpoint

NUM_NEW = 10
LOGIT_ATOL = 1e-4


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_family_checkpoint(tmp_path_factory.mktemp(request.param), request.param, seed=3)


@lru_cache(maxsize=4)
def runner_for(path: Path) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=4096, max_num_reqs=16))


def prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 4096, size=n).tolist() for n in lengths]


def test_the_runner_builds_the_family_it_was_given(family_path: Path) -> None:
    runner = runner_for(family_path)
    written = json.loads((family_path / "config.json").read_text())["architectures"]
    assert [type(runner.model).__name__] == written


def test_single_request_greedy_matches_transformers(family_path: Path) -> None:
    runner = runner_for(family_path)
    for prompt in prompts(0, [1, 9, 23]):
        assert generate(runner, [prompt], NUM_NEW) == [hf_greedy(family_path, prompt, NUM_NEW)]


def test_batched_ragged_requests_match_transformers(family_path: Path) -> None:
    runner = runner_for(family_path)
    batch = prompts(1, [3, 30, 1, 17, 8])
    lengths = [NUM_NEW, 3, NUM_NEW, 1, 7]
    outputs = generate(runner, batch, lengths, prefill_chunk=16)
    assert outputs == [hf_greedy(family_path, p, n) for p, n in zip(batch, lengths, strict=True)]


def test_decode_logits_match_transformers_at_every_step(family_path: Path) -> None:
    """Teacher-forced: decode logits equal the reference logits at each position."""
    runner = runner_for(family_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    sequence = prompts(4, [18])[0]
    reference = hf_logits(family_path, sequence)
    prefill_len, row = 6, 1
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


def test_extend_on_cached_prefix_matches_full_prefill(family_path: Path) -> None:
    """Request B reuses request A's KV slots for a shared prefix and only computes its suffix."""
    runner = runner_for(family_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    shared, suffix = prompts(3, [21, 6])
    slots_a = allocator.try_alloc(len(shared))
    runner.forward(runner.extend_batch([ExtendRequest(1, np.array(shared), slots_a[:0], slots_a)]))
    slots_b = allocator.try_alloc(len(suffix))
    out = runner.forward(runner.extend_batch([ExtendRequest(2, np.array(suffix), slots_a, slots_b)]))
    reference = hf_logits(family_path, shared + suffix)
    torch.testing.assert_close(out.next_token_logits[0], reference[-1], atol=LOGIT_ATOL, rtol=0)


def test_engine_with_radix_cache_hits_gives_the_reference_tokens(family_path: Path) -> None:
    shared = prompts(5, [20])[0]
    batch = [shared + tail for tail in prompts(6, [3, 9, 1])]
    params = {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}
    expected = [hf_greedy(family_path, p, 6) for p in batch]
    engine = Engine(model_path=str(family_path), device="cpu", max_total_tokens=2048, debug_invariants=True)
    try:
        first = engine.generate(input_ids=batch[:1], sampling_params=params)
        again = engine.generate(input_ids=batch, sampling_params=params)
        assert all(r["meta_info"]["cached_tokens"] >= len(shared) for r in again)
        assert [r["output_ids"] for r in again] == expected
        assert first[0]["output_ids"] == expected[0]
        engine.check_invariants()
    finally:
        engine.shutdown()


VARIANTS = [
    # Qwen3 with tied embeddings; Qwen3-MoE with unnormalized top-k and dense layers 0 and 2
    # (decoder_sparse_step 2, mlp_only_layers [3]); Qwen2-MoE without q/k/v biases, top-1.
    ("qwen3", {"tie_word_embeddings": True}),
    (
        "qwen3_moe",
        {"norm_topk_prob": False, "decoder_sparse_step": 2, "mlp_only_layers": [3], "num_hidden_layers": 4},
    ),
    ("qwen2_moe", {"qkv_bias": False, "num_experts_per_tok": 1, "mlp_only_layers": []}),
    # Mixtral over several safetensors files (experts of one layer in different files).
    ("mixtral", {"max_shard_size": "100KB"}),
    # Sliding windows shorter than the prompts: Mixtral on every layer, Qwen3 past layer 0.
    ("mixtral", {"sliding_window": 8}),
    ("qwen3", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}),
]


@pytest.mark.parametrize(("family", "overrides"), VARIANTS)
def test_config_variants_match_transformers(family: str, overrides: dict, tmp_path: Path) -> None:
    path = write_family_checkpoint(tmp_path / family, family, seed=11, **overrides)
    runner = ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=1024, max_num_reqs=4))
    batch = prompts(12, [13, 4, 27])
    assert generate(runner, batch, 6) == [hf_greedy(path, p, 6) for p in batch]


def test_fused_triton_experts_inside_the_model_match_transformers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA expert kernels (interpreted here) in place of the CPU path, through a whole model."""
    from sglr.kernels.triton_moe import fused_expert_mlp
    from sglr.model import moe

    calls = []

    def triton_experts(hidden, w13, w2, topk_weights, topk_ids, cpu_packs=None):
        calls.append(hidden.shape[0])
        return fused_expert_mlp(hidden, w13, w2, topk_weights, topk_ids)

    monkeypatch.setattr(moe, "expert_mlp", triton_experts)
    path = write_family_checkpoint(tmp_path / "qwen2_moe", "qwen2_moe", seed=13)
    runner = ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=1024, max_num_reqs=4))
    batch = prompts(14, [9, 3])
    assert generate(runner, batch, 4) == [hf_greedy(path, p, 4) for p in batch]
    assert calls  # the kernels did run


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_fused_experts_with_decode_cuda_graphs_match_transformers(family_path: Path) -> None:
    """On CUDA the experts run in the fused Triton kernels, also inside captured decode graphs."""
    runners = [
        ModelRunner(
            RunnerConfig(
                family_path,
                device="cuda",
                dtype="float32",
                kv_num_tokens=4096,
                max_num_reqs=16,
                attention_backend="triton",
                cuda_graph_max_bs=graphs,
            )
        )
        for graphs in (0, 8)
    ]
    assert runners[1].cuda_graphs is not None
    batch = prompts(15, [5, 40, 1, 17])
    expected = [hf_greedy(family_path, p, 8) for p in batch]
    for runner in runners:
        assert generate(runner, batch, 8) == expected
