"""CUDA-only runner checks: compiled Triton kernels, decode CUDA graphs, FlashInfer, bf16."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hf_twin import hf_greedy

from sglr.engine.kv import KVSlotAllocator
from sglr.engine.offline import generate_token_ids as generate
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig

pytestmark = pytest.mark.gpu


def gpu_runner(path: Path, backend: str, graphs: int = 0, dtype: str = "float32") -> ModelRunner:
    return ModelRunner(
        RunnerConfig(
            path, device="cuda", dtype=dtype, kv_num_tokens=16384, max_num_reqs=64,
            attention_backend=backend, cuda_graph_max_bs=graphs,
        )
    )  # fmt: skip


def ragged_prompts(seed: int, count: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 4096, size=int(n)).tolist() for n in rng.integers(1, 200, size=count)]


@pytest.mark.parametrize("backend", ["torch", "triton", "flashinfer"])
def test_gpu_greedy_matches_transformers(tiny_path: Path, backend: str) -> None:
    if backend == "flashinfer":
        pytest.importorskip("flashinfer", reason="flashinfer is an optional dependency")
    runner = gpu_runner(tiny_path, backend)
    batch = ragged_prompts(0, 8)
    expected = [hf_greedy(tiny_path, p, 10) for p in batch]
    assert generate(runner, batch, 10) == expected
    assert generate(runner, batch, 10, prefill_chunk=32) == expected


def test_cuda_graph_decode_equals_eager_decode(tiny_path: Path) -> None:
    eager = gpu_runner(tiny_path, "triton", graphs=0)
    graphed = gpu_runner(tiny_path, "triton", graphs=16)
    assert graphed.cuda_graphs is not None and eager.cuda_graphs is None
    for batch_size in (1, 3, 16):  # 3 replays the size-4 graph with one padded entry
        batch = ragged_prompts(batch_size, batch_size)
        assert generate(graphed, batch, 12) == generate(eager, batch, 12)


def test_cuda_graph_logits_match_eager_logits(tiny_path: Path) -> None:
    runners = [gpu_runner(tiny_path, "triton", graphs=0), gpu_runner(tiny_path, "triton", graphs=8)]
    logits = []
    for runner in runners:
        allocator = KVSlotAllocator(runner.num_kv_slots)
        prompts = ragged_prompts(5, 5)
        rows = list(range(1, len(prompts) + 1))
        extends = [ExtendRequest(r, np.array(p), np.zeros(0, np.int32), allocator.try_alloc(len(p)))
                   for r, p in zip(rows, prompts, strict=True)]  # fmt: skip
        runner.forward(runner.extend_batch(extends))
        batch = runner.decode_batch(rows, [1] * 5, [len(p) + 1 for p in prompts], allocator.try_alloc(5))
        logits.append(runner.forward(batch).next_token_logits.clone())
    torch.testing.assert_close(logits[0], logits[1], atol=1e-4, rtol=0)


def forced_logits(runner: ModelRunner, prompts: list[list[int]], forced: list[list[int]]) -> torch.Tensor:
    """fp32 logits `[1 + steps, B, V]`: after each prompt, then after each forced token (the same
    inputs for every runner, so one flipped near-tie cannot derail the rest of a sequence)."""
    allocator = KVSlotAllocator(runner.num_kv_slots)
    rows = list(range(1, len(prompts) + 1))
    extends = [ExtendRequest(r, np.array(p), np.zeros(0, np.int32), allocator.try_alloc(len(p)))
               for r, p in zip(rows, prompts, strict=True)]  # fmt: skip
    logits = [runner.forward(runner.extend_batch(extends)).next_token_logits.float().cpu()]
    seq_lens = [len(p) for p in prompts]
    for step in range(len(forced[0])):
        seq_lens = [n + 1 for n in seq_lens]
        batch = runner.decode_batch(rows, [f[step] for f in forced], seq_lens, allocator.try_alloc(len(rows)))
        logits.append(runner.forward(batch).next_token_logits.float().cpu())
    return torch.stack(logits)


def test_bf16_triton_is_as_close_to_fp32_as_the_torch_backend(tiny_path: Path) -> None:
    """bf16 prefill and 8 decode steps (CUDA graphs on the triton side) against the fp32 model:
    the triton kernels' error stays within a small multiple of the torch backend's (both round
    activations and weights to bf16); a wrong kernel would be off by the logits' own size."""
    prompts = ragged_prompts(7, 6)
    exact_runner = gpu_runner(tiny_path, "torch", dtype="float32")
    forced = [sequence[:-1] for sequence in generate(exact_runner, prompts, 8)]
    exact = forced_logits(exact_runner, prompts, forced)
    torch_bf16 = forced_logits(gpu_runner(tiny_path, "torch", dtype="bfloat16"), prompts, forced)
    triton_bf16 = forced_logits(gpu_runner(tiny_path, "triton", dtype="bfloat16", graphs=8), prompts, forced)
    torch_error = (torch_bf16 - exact).abs().amax().item()
    triton_error = (triton_bf16 - exact).abs().amax().item()
    assert triton_error <= 3 * torch_error + 0.02, (triton_error, torch_error)
    assert triton_error < 0.1 * exact.abs().amax().item()
    # Where the exact top-2 margin exceeds both errors, both pick the exact greedy token.
    top2 = exact.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 2 * (torch_error + triton_error)
    assert clear.any()
    for logits in (torch_bf16, triton_bf16):
        assert torch.equal(logits.argmax(-1)[clear], exact.argmax(-1)[clear])
