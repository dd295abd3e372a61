"""FP8 linear math (`sglr.kernels.fp8_linear`) against its dequantized reference, and online
quantization (`quantization="fp8"`) of a tiny model against a dense model holding the same
dequantized weights, on the CPU (the emulated path)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fp8_testing import cpu_runner, max_abs, online_fp8_reference, sequence, teacher_forced_logits

from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import ModelConfigError
from sglr.kernels.fp8_linear import FP8_MAX, Fp8Weight, fp8_linear, quantize_per_channel, quantize_rows
from sglr.model.fp8_weights import fp8_linears
from sglr.model.runner import RunnerConfig
from sglr.testing.tiny import tiny_model_path

# e4m3: 3 mantissa bits, so a normal value rounds within half an ulp, 2^-4 of itself; below the
# smallest normal (2^-6) the spacing is fixed at 2^-9 (half: 2^-10), in units of the scale.
_E4M3_RELATIVE = 2.0**-4
_E4M3_SUBNORMAL_HALF_ULP = 2.0**-10


def _rounding_bound(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.maximum(_E4M3_RELATIVE * x.abs(), _E4M3_SUBNORMAL_HALF_ULP * scale)


def test_rows_round_within_e4m3_precision_and_amax_maps_to_448() -> None:
    x = torch.randn(16, 96, generator=torch.Generator().manual_seed(0)) * torch.logspace(-3, 2, 16)[:, None]
    values, scale = quantize_rows(x)
    assert scale.shape == (16, 1)
    assert torch.equal(values.float().abs().amax(dim=1), torch.full((16,), FP8_MAX))
    back = values.float() * scale
    assert bool(((back - x).abs() <= _rounding_bound(x, scale)).all())
    assert max_abs(back, x) > 0  # it does round


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fp8_linear_is_the_product_of_the_dequantized_operands(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(1)
    weight = quantize_per_channel(torch.randn(48, 64, generator=generator))
    x = torch.randn(5, 7, 64, generator=generator).to(dtype)
    values, scale = quantize_rows(x.reshape(-1, 64))
    rows = (values.float() * scale).to(dtype)
    expected = F.linear(rows, weight.dequantized(dtype)).view(5, 7, 48)
    out = fp8_linear(x, weight)
    assert out.dtype == dtype
    assert torch.equal(out, expected)


def test_per_channel_weights_round_within_e4m3_precision() -> None:
    weight = torch.randn(32, 40, generator=torch.Generator().manual_seed(2))
    fp8 = quantize_per_channel(weight)
    assert fp8.scale.shape == (32, 1) and fp8.group_size == 40
    assert bool(((fp8.dequantized(torch.float32) - weight).abs() <= _rounding_bound(weight, fp8.scale)).all())


def test_block_scales_cover_their_columns() -> None:
    values = torch.ones(4, 5).to(torch.float8_e4m3fn)
    scale = torch.tensor([[1.0, 2.0, 3.0]]).expand(4, 3).contiguous()
    dense = Fp8Weight(values, scale, group_size=2).dequantized(torch.float32)
    assert dense[0].tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="scale"):
        Fp8Weight(values, scale[:, :2], group_size=2)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_online_fp8_matches_its_dequantized_reference(arch: str) -> None:
    path = tiny_model_path(arch)
    fp8 = cpu_runner(path, quantization="fp8")
    linears = list(fp8_linears(fp8.model))
    assert len(linears) == 4 * fp8.config.num_hidden_layers
    assert all(m.fp8 is not None and m.weight is None for _, m in linears)
    reference = online_fp8_reference(path)
    tokens = sequence(3)
    fp8_logits = teacher_forced_logits(fp8, tokens)
    reference_logits = teacher_forced_logits(reference, tokens)
    # The quantization error itself (vs the unquantized model) sets the scale; the fp8 path and
    # its reference compute the same products, so only fp32 rounding may separate them.
    quantization_error = max_abs(reference_logits, teacher_forced_logits(cpu_runner(path), tokens))
    assert quantization_error > 0
    assert max_abs(fp8_logits, reference_logits) <= 0.01 * quantization_error
    prompts = [sequence(4, 9), sequence(5, 3)]
    assert generate(fp8, prompts, 12) == generate(reference, prompts, 12)


def test_unknown_quantization_is_refused() -> None:
    with pytest.raises(ModelConfigError, match="quantization"):
        RunnerConfig(None, quantization="int4")
    with pytest.raises(ModelConfigError, match="kv_cache_dtype"):
        RunnerConfig(None, kv_cache_dtype="fp8_e5m2")


def test_lora_deltas_add_to_fp8_linears(tmp_path) -> None:
    """A batch mixing the base model and an adapter: the base row equals the fp8 runner without
    LoRA exactly (the fp8 product in `Linear._forward_with_lora`), the adapted row moves by about
    what the adapter moves the dense model."""
    import numpy as np

    from sglr.model.forward_batch import ExtendRequest
    from sglr.testing.tiny_lora import write_random_adapter

    path = tiny_model_path("llama")
    plain = cpu_runner(path, quantization="fp8")
    adapter = write_random_adapter(plain.config, tmp_path / "adapter", target_modules=("q_proj", "down_proj"))
    options = {"enable_lora": True, "lora_adapters": ((1, "a", str(adapter)),)}

    def logits(runner, lora_ids):
        prompt = np.array(sequence(70, 10))
        requests = [
            ExtendRequest(row, prompt, np.zeros(0, np.int32), np.arange(1, 11) + 10 * row, lora_id=lora_id)
            for row, lora_id in enumerate(lora_ids, start=1)
        ]
        return runner.forward(runner.extend_batch(requests)).next_token_logits

    fp8 = logits(cpu_runner(path, quantization="fp8", **options), [0, 1])
    dense = logits(cpu_runner(path, **options), [0, 1])
    assert torch.equal(fp8[0], logits(plain, [0, 0])[0])  # the same batch shape: the same rounding
    adapter_shift = max_abs(dense[1], dense[0])
    assert adapter_shift > 0
    # Against the dense model, the adapted row is off by the quantization error (the base row's)
    # plus how the adapter's own shift changes with it: both well under the shift itself.
    assert max_abs(fp8[1], dense[1]) <= max_abs(fp8[0], dense[0]) + 0.5 * adapter_shift
