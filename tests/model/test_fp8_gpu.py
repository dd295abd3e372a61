"""On a CUDA device with fp8 tensor cores (compute capability >= 8.9): `torch._scaled_mm`'s
product against the emulation and against the exact fp32 product of the same quantized
operands, and a bf16 model whose linears take that path against the same model emulated."""

from __future__ import annotations

import pytest
import torch
from fp8_testing import max_abs, round_kv_through_fp8, sequence, teacher_forced_logits

from sglr.kernels import fp8_linear
from sglr.kernels.fp8_linear import emulated_fp8_linear, quantize_per_channel, quantize_rows, uses_scaled_mm
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path

pytestmark = pytest.mark.gpu


def _needs_fp8_tensor_cores() -> None:
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.fail("these tests need compute capability >= 8.9 (H100 / H200 / L4 / RTX 4090)")


@pytest.mark.parametrize("num_rows", [1, 7, 256])
def test_scaled_mm_equals_the_emulation_within_the_emulations_own_rounding(num_rows: int) -> None:
    _needs_fp8_tensor_cores()
    generator = torch.Generator(device="cuda").manual_seed(0)
    weight = quantize_per_channel(torch.randn(1024, 512, device="cuda", generator=generator))
    x = torch.randn(num_rows, 512, device="cuda", generator=generator).to(torch.bfloat16)
    assert uses_scaled_mm(x, weight)
    out = fp8_linear.fp8_linear(x, weight)
    values, scale = quantize_rows(x)
    emulated = emulated_fp8_linear(values, scale, weight, torch.bfloat16)
    # The exact product of the quantized operands: fp32 dequantized values, fp32 matmul.
    exact = emulated_fp8_linear(values, scale, weight, torch.float32)
    emulation_error = max_abs(emulated.float(), exact)
    assert emulation_error > 0
    # _scaled_mm accumulates in fp32 and rounds once to bf16; the emulation also rounds both
    # operands to bf16 first, so it is the looser of the two: one bf16 half-ulp of the largest
    # output on top of the emulation's own error bounds the kernel's.
    half_ulp = float(exact.abs().max()) * 2.0**-9
    assert max_abs(out.float(), exact) <= emulation_error + half_ulp
    assert max_abs(out.float(), emulated.float()) <= 2 * emulation_error + half_ulp


def test_a_bf16_model_on_scaled_mm_matches_it_emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_fp8_tensor_cores()
    path = tiny_model_path("llama", hidden_size=128, intermediate_size=256)

    def runner(**options) -> ModelRunner:
        config = RunnerConfig(
            path, device="cuda", dtype="bfloat16", kv_num_tokens=2048, max_num_reqs=8, **options
        )
        return ModelRunner(config)

    tokens = sequence(60)
    dense = teacher_forced_logits(runner(cuda_graph_max_bs=0), tokens)
    on_kernel = teacher_forced_logits(runner(quantization="fp8"), tokens)
    monkeypatch.setattr(fp8_linear, "uses_scaled_mm", lambda x, weight: False)
    emulated = teacher_forced_logits(runner(quantization="fp8", cuda_graph_max_bs=0), tokens)
    quantization_error = max_abs(emulated, dense)
    assert quantization_error > 0
    assert max_abs(on_kernel, emulated) <= quantization_error


def test_fp8_kv_cache_on_cuda_matches_a_bf16_cache_of_rounded_values() -> None:
    path = tiny_model_path("llama")

    def runner(**options) -> ModelRunner:
        config = RunnerConfig(
            path, device="cuda", dtype="bfloat16", kv_num_tokens=2048, attention_backend="torch", **options
        )
        return ModelRunner(config)

    fp8 = runner(kv_cache_dtype="fp8_e4m3")
    assert fp8.attn.name == "torch" and fp8.cuda_graphs is None
    tokens = sequence(61)
    fp8_logits = teacher_forced_logits(fp8, tokens)
    reference = teacher_forced_logits(round_kv_through_fp8(runner()), tokens)
    rounding_error = max_abs(reference, teacher_forced_logits(runner(), tokens))
    assert rounding_error > 0
    assert max_abs(fp8_logits, reference) <= 0.01 * rounding_error
