"""`kv_cache_dtype="fp8_e4m3"`: K/V stored as e4m3 with per-layer scales, dequantized by the torch
attention backend. Compared with a float cache that rounds K/V through e4m3 at store (the same
values read back): same greedy tokens, logits within fp32 rounding of it, measured against the
error of the rounding itself (vs the float cache). Plus the refusals and fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fp8_testing import (
    cpu_runner,
    max_abs,
    online_fp8_reference,
    round_activations,
    round_kv_through_fp8,
    sequence,
    teacher_forced_logits,
)

from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import KVCacheCapacityError, ModelConfigError
from sglr.kernels.fp8_linear import FP8_DTYPE
from sglr.model.cpu_fused_decode import unsupported_reason
from sglr.model.kv_cache import KVCache, KVCacheShape
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_fp8 import write_fp8_twins


def test_an_fp8_cache_stores_scaled_e4m3_values() -> None:
    cache = KVCache(KVCacheShape(2, 2, 8, FP8_DTYPE), num_slots=6, device="cpu")
    assert cache.is_fp8 and cache.scales(0) == (1.0, 1.0)
    cache.set_scales(1, 0.5, 0.25)
    k = torch.randn(3, 2, 8, generator=torch.Generator().manual_seed(0))
    v = 2 * k
    cache.store(1, torch.tensor([1, 4, 5]), k, v)
    assert cache.k_cache(1).dtype == FP8_DTYPE
    assert torch.equal(cache.k_cache(1)[[1, 4, 5]].float(), (k / 0.5).to(FP8_DTYPE).float())
    assert torch.equal(cache.v_cache(1)[[1, 4, 5]].float(), (v / 0.25).to(FP8_DTYPE).float())
    assert not cache.k_cache(0).float().any()  # another layer's rows are untouched
    with pytest.raises(KVCacheCapacityError):
        cache.set_scales(0, 0.0, 1.0)


def _compare(fp8, reference, baseline, seed: int) -> None:
    tokens = sequence(seed)
    fp8_logits = teacher_forced_logits(fp8, tokens)
    reference_logits = teacher_forced_logits(reference, tokens)
    rounding_error = max_abs(reference_logits, teacher_forced_logits(baseline, tokens))
    assert rounding_error > 0
    assert max_abs(fp8_logits, reference_logits) <= 0.01 * rounding_error
    prompts = [sequence(seed + 1, 13), sequence(seed + 2, 4)]
    assert generate(fp8, prompts, 12) == generate(reference, prompts, 12)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_fp8_kv_cache_matches_a_float_cache_of_rounded_values(arch: str) -> None:
    path = tiny_model_path(arch)
    fp8 = cpu_runner(path, kv_cache_dtype="fp8_e4m3")
    assert fp8.kv_cache.k_buffer.dtype == FP8_DTYPE and fp8.attn.name == "torch"
    assert fp8.kv_cache.memory_bytes() * 4 == cpu_runner(path).kv_cache.memory_bytes()  # 1 byte, not 4
    _compare(fp8, round_kv_through_fp8(cpu_runner(path)), cpu_runner(path), seed=10)


def test_kv_scales_come_from_the_checkpoint(tmp_path: Path) -> None:
    fp8_dir, dense_dir = write_fp8_twins(
        tiny_model_path("llama"), tmp_path, "per_channel", kv_scales=(0.5, 0.25)
    )
    fp8 = cpu_runner(fp8_dir, kv_cache_dtype="fp8_e4m3")
    assert [fp8.kv_cache.scales(layer) for layer in range(2)] == [(0.5, 0.25)] * 2
    reference = round_kv_through_fp8(round_activations(cpu_runner(dense_dir), like=fp8), scales=(0.5, 0.25))
    baseline = round_activations(cpu_runner(dense_dir), like=fp8)  # fp8 weights, float cache
    _compare(fp8, reference, baseline, seed=20)


def test_fp8_weights_and_fp8_kv_together() -> None:
    path = tiny_model_path("llama")
    fp8 = cpu_runner(path, kv_cache_dtype="fp8_e4m3", quantization="fp8")
    assert fp8.kv_cache.is_fp8 and all(m.fp8 is not None for m in (fp8.model.model.layers[0].mlp.down_proj,))
    _compare(fp8, round_kv_through_fp8(online_fp8_reference(path)), online_fp8_reference(path), seed=30)


def test_backends_that_cannot_read_fp8_are_refused() -> None:
    with pytest.raises(ModelConfigError, match="torch attention backend"):
        cpu_runner(tiny_model_path("llama"), kv_cache_dtype="fp8_e4m3", attention_backend="triton")


def test_the_fused_cpu_decode_step_turns_off_over_an_fp8_cache() -> None:
    runner = cpu_runner(tiny_model_path("llama"), kv_cache_dtype="fp8_e4m3")
    reason = unsupported_reason(runner.model, runner.kv_cache)
    assert reason is not None and "float8" in reason
