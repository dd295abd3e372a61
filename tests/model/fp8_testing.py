"""Shared by the fp8 tests: runners, teacher-forced logits, and the references the fp8 paths
must match (dense dequantized weights with activations rounded as the fp8 linears round them;
a KV cache that rounds K/V through e4m3 but stores them dequantized)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sglr.engine.kv import KVSlotAllocator
from sglr.kernels.fp8_linear import FP8_DTYPE, FP8_MAX, quantize_per_channel, quantize_rows
from sglr.model.forward_batch import ExtendRequest
from sglr.model.fp8_weights import fp8_linears
from sglr.model.runner import ModelRunner, RunnerConfig

SEQUENCE_LEN = 24
PREFILL_LEN = 8


def cpu_runner(path: Path, **options) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=2048, max_num_reqs=8, **options))


def sequence(seed: int = 0, length: int = SEQUENCE_LEN) -> list[int]:
    return np.random.default_rng(seed).integers(3, 4096, size=length).tolist()


def teacher_forced_logits(
    runner: ModelRunner, tokens: list[int], prefill_len: int = PREFILL_LEN
) -> torch.Tensor:
    """fp32 logits after each token from `prefill_len - 1` on: one extend, then one decode step
    per token (so every step reads the K/V the earlier ones stored)."""
    allocator = KVSlotAllocator(runner.num_kv_slots)
    slots = allocator.try_alloc(prefill_len)
    prompt = np.array(tokens[:prefill_len])
    out = runner.forward(runner.extend_batch([ExtendRequest(1, prompt, slots[:0], slots)]))
    logits = [out.next_token_logits[0].clone()]
    for pos in range(prefill_len, len(tokens)):
        slot = allocator.try_alloc(1)
        out = runner.forward(runner.decode_batch([1], [tokens[pos]], [pos + 1], slot))
        logits.append(out.next_token_logits[0].clone())
    return torch.stack(logits)


def rounded_rows(x: torch.Tensor) -> torch.Tensor:
    """`x` with each row rounded through e4m3 at its amax / 448 scale, as fp8 linears see it."""
    values, scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    return (values.to(torch.float32) * scale).to(x.dtype).view(x.shape)


def round_activations(runner: ModelRunner, like: ModelRunner | None = None) -> ModelRunner:
    """Makes a dense runner's fp8-eligible linears (those that are fp8 in `like`, when given) see
    their inputs as the fp8 ones do."""
    fp8_names = None if like is None else {n for n, m in fp8_linears(like.model) if m.fp8 is not None}
    for name, module in fp8_linears(runner.model):
        if fp8_names is not None and name not in fp8_names:
            continue
        module.register_forward_pre_hook(lambda _module, args: (rounded_rows(args[0]),))
    return runner


def online_fp8_reference(path: Path) -> ModelRunner:
    """A dense runner whose fp8-eligible weights are their per-channel fp8 values, dequantized,
    and whose inputs to them are rounded per token: the math the fp8 runner does."""
    runner = cpu_runner(path)
    with torch.no_grad():
        for _, module in fp8_linears(runner.model):
            module.weight.copy_(quantize_per_channel(module.weight).dequantized(torch.float32))
    return round_activations(runner)


def round_kv_through_fp8(runner: ModelRunner, scales: tuple[float, float] = (1.0, 1.0)) -> ModelRunner:
    """Makes a float KV cache store K/V rounded through e4m3 (at `scales`), dequantized: the
    values an fp8 cache gives back. The CPU decode kernel, which stores by itself, is turned off."""
    runner.attn.use_cpu_decode_kernel = False
    cache = runner.kv_cache
    store = cache.store

    def rounded(x: torch.Tensor, scale: float) -> torch.Tensor:
        return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).to(torch.float32) * scale

    def store_rounded(layer_id: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        k_scale, v_scale = scales
        store(layer_id, slots, rounded(k, k_scale).to(k.dtype), rounded(v, v_scale).to(v.dtype))

    cache.store = store_rounded
    return runner


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())
