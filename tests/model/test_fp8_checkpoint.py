"""FP8 checkpoints in each layout sglr loads (compressed-tensors per tensor / per channel,
block-wise `weight_scale_inv`): written from a tiny model, loaded as fp8 linears, and compared
with the dense model holding the dequantized values (same weights exactly, same greedy tokens,
logits within fp32 rounding of it measured against the quantization error). Also tensor-parallel
slices and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fp8_testing import cpu_runner, max_abs, round_activations, sequence, teacher_forced_logits

from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import CheckpointError, ModelConfigError
from sglr.model.build import build_model
from sglr.model.config import load_model_config
from sglr.model.fp8_checkpoint import fp8_checkpoint_layout, load_fp8_checkpoint
from sglr.model.fp8_weights import fp8_linears
from sglr.model.loader import iter_checkpoint_tensors
from sglr.model.parallel import TensorParallel
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_fp8 import FP8_LAYOUTS, IGNORED_LINEAR, write_fp8_twins


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("layout", FP8_LAYOUTS)
def test_fp8_checkpoint_matches_its_dequantized_weights(tmp_path: Path, layout: str, arch: str) -> None:
    source = tiny_model_path(arch)
    fp8_dir, dense_dir = write_fp8_twins(source, tmp_path, layout)
    fp8 = cpu_runner(fp8_dir)
    reference = round_activations(cpu_runner(dense_dir), like=fp8)
    dense_modules = dict(reference.model.named_modules())
    for name, module in fp8_linears(fp8.model):
        if layout != "block" and name == IGNORED_LINEAR:
            assert module.fp8 is None  # listed in `ignore`: stored in float, loaded dense
            continue
        assert module.fp8 is not None and module.weight is None, name
        assert module.fp8.per_channel == (layout != "block")
        assert torch.equal(module.fp8.dequantized(torch.float32), dense_modules[name].weight), name
    tokens = sequence(6)
    fp8_logits = teacher_forced_logits(fp8, tokens)
    reference_logits = teacher_forced_logits(reference, tokens)
    quantization_error = max_abs(reference_logits, teacher_forced_logits(cpu_runner(source), tokens))
    assert quantization_error > 0
    assert max_abs(fp8_logits, reference_logits) <= 0.01 * quantization_error
    prompts = [sequence(7, 11), sequence(8, 2)]
    assert generate(fp8, prompts, 12) == generate(reference, prompts, 12)


def _rank_model(model_dir: Path, rank: int, fp8: bool) -> torch.nn.Module:
    config = load_model_config(model_dir)
    tp = TensorParallel(rank=rank, size=2, group=None, cpu_group=None)  # slicing only: no collectives
    model = build_model(config, torch.float32, torch.device("cpu"), 64, tp)
    consumed = load_fp8_checkpoint(model, model_dir, fp8_checkpoint_layout(model_dir)) if fp8 else set()
    model.load_weights((n, t) for n, t in iter_checkpoint_tensors(model_dir, lazy=True) if n not in consumed)
    return model


@pytest.mark.parametrize("layout", ["per_channel", "block"])
def test_tensor_parallel_ranks_load_their_slices_with_their_scales(tmp_path: Path, layout: str) -> None:
    """Column-parallel (qkv, gate_up) ranks take their rows and those rows' scales; row-parallel
    ones (o, down) their columns and, block-wise, those columns' scale blocks (the 48-row blocks
    straddle the ranks' row ranges)."""
    fp8_dir, dense_dir = write_fp8_twins(tiny_model_path("llama"), tmp_path, layout, block=(48, 32))
    for rank in (0, 1):
        fp8_model, dense_model = _rank_model(fp8_dir, rank, True), _rank_model(dense_dir, rank, False)
        dense_modules = dict(dense_model.named_modules())
        checked = 0
        for name, module in fp8_linears(fp8_model):
            if module.fp8 is None:
                continue
            assert torch.equal(module.fp8.dequantized(torch.float32), dense_modules[name].weight), (
                rank,
                name,
            )
            checked += 1
        assert checked >= 7


def test_a_rank_split_inside_a_scale_block_is_refused(tmp_path: Path) -> None:
    fp8_dir, _ = write_fp8_twins(tiny_model_path("llama"), tmp_path, "block", block=(48, 48))
    with pytest.raises(CheckpointError, match="scale block"):
        _rank_model(fp8_dir, 1, True)  # o_proj's second rank starts at column 32


def _edit_config(model_dir: Path, **quantization) -> None:
    path = model_dir / "config.json"
    config = json.loads(path.read_text())
    config["quantization_config"] = quantization
    path.write_text(json.dumps(config))


@pytest.mark.parametrize(
    "quantization",
    [
        {"quant_method": "awq"},
        {"quant_method": "fp8", "fmt": "e5m2"},
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
        },
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "group"}}},
        },
    ],
)
def test_quantizations_sglr_does_not_load_are_refused(tmp_path: Path, quantization: dict) -> None:
    fp8_dir, _ = write_fp8_twins(tiny_model_path("llama"), tmp_path, "per_channel")
    _edit_config(fp8_dir, **quantization)
    with pytest.raises(ModelConfigError):
        cpu_runner(fp8_dir)


def test_an_fp8_tensor_no_fp8_linear_takes_is_refused(tmp_path: Path) -> None:
    """An fp8 embedding would be cast to float without its scale: refused, never loaded."""
    from safetensors.torch import load_file, save_file

    fp8_dir, _ = write_fp8_twins(tiny_model_path("llama"), tmp_path, "per_channel")
    tensors = load_file(str(fp8_dir / "model.safetensors"))
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].to(torch.float8_e4m3fn)
    save_file(tensors, str(fp8_dir / "model.safetensors"))
    with pytest.raises(CheckpointError, match="embed_tokens"):
        cpu_runner(fp8_dir)
