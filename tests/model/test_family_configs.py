"""Reading the dense families' configs: windows per layer, Gemma options, and the typed errors
for what sglr does not run (unknown architectures, LongRoPE, partial rotary embeddings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from dense_families import family_config, write_family_checkpoint

from sglr.errors import ModelConfigError
from sglr.model.build import build_model
from sglr.model.config import ModelConfig, load_model_config
from sglr.model.parallel import TensorParallel
from sglr.model.runner import ModelRunner, RunnerConfig


def config_of(family: str, **overrides) -> ModelConfig:
    return ModelConfig.from_dict(family_config(family, **overrides).to_dict())


def test_windows_and_gemma_options_per_family() -> None:
    assert config_of("mistral").family.layer_windows == (8, 8)
    assert config_of("mistral", sliding_window=None).family.layer_windows == ()
    gemma2 = config_of("gemma2", num_hidden_layers=4, layer_types=None).family
    assert gemma2.layer_windows == (8, None, 8, None)  # local first, then alternating
    assert (gemma2.attn_logit_softcap, gemma2.final_logit_softcap) == (1.5, 4.0)
    assert gemma2.attention_variant(0, 16).scale == pytest.approx(24**-0.5)
    gemma3 = config_of("gemma3").family
    assert gemma3.layer_windows == (8, None, 8)
    assert gemma3.rope_local_theta == 100.0 and gemma3.hidden_act == "gelu_pytorch_tanh"
    assert config_of("gemma3").rope_scaling.rope_type == "linear"  # the global layers' RoPE
    assert config_of("qwen2").family.layer_windows == (None, 8)
    assert config_of("qwen2", use_sliding_window=False).family.layer_windows == ()
    assert config_of("phi3").family.layer_windows == ()


def test_gemma3_window_pattern_from_an_older_config() -> None:
    raw = family_config("gemma3", num_hidden_layers=7, layer_types=None).to_dict()
    del raw["layer_types"]
    raw["sliding_window_pattern"] = 3
    assert ModelConfig.from_dict(raw).family.layer_windows == (8, 8, None, 8, 8, None, 8)


@pytest.mark.parametrize("architecture", ["FooForCausalLM", "MixtralForCausalLM", "GPT2LMHeadModel"])
def test_unsupported_architecture_fails_at_load_naming_it(tmp_path: Path, architecture: str) -> None:
    path = write_family_checkpoint(tmp_path / "m", "mistral")
    raw = json.loads((path / "config.json").read_text())
    raw["architectures"] = [architecture]
    (path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ModelConfigError, match=architecture):
        load_model_config(path)
    with pytest.raises(ModelConfigError, match=architecture):
        ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64, max_num_reqs=2))


@pytest.mark.parametrize("rope_type", ["longrope", "su"])
def test_phi3_longrope_is_refused_by_name(rope_type: str) -> None:
    raw = family_config("phi3").to_dict()
    raw["rope_parameters"] = {"rope_type": rope_type, "rope_theta": 10000.0}
    with pytest.raises(ModelConfigError, match=rope_type):
        ModelConfig.from_dict(raw)


def test_partial_rotary_embeddings_are_refused() -> None:
    raw = family_config("phi3").to_dict()
    raw["rope_parameters"]["partial_rotary_factor"] = 0.75
    with pytest.raises(ModelConfigError, match="partial_rotary_factor"):
        ModelConfig.from_dict(raw)


def test_phi3_fused_tensors_split_per_rank(tmp_path: Path) -> None:
    """Under tensor parallelism each rank holds its own q, k, v, gate and up rows of the fused
    checkpoint tensors (loading needs no collectives, so ranks are built here side by side)."""
    from safetensors.torch import load_file

    path = write_family_checkpoint(tmp_path / "phi3", "phi3")
    config = load_model_config(path)
    checkpoint = load_file(path / "model.safetensors")
    fused_qkv = checkpoint["model.layers.1.self_attn.qkv_proj.weight"]
    fused_gate_up = checkpoint["model.layers.1.mlp.gate_up_proj.weight"]
    q_all, k_all, v_all = fused_qkv.split((config.q_size, config.kv_size, config.kv_size))
    gate_all, up_all = fused_gate_up.chunk(2)
    for rank in range(2):
        tp = TensorParallel(rank, 2, None, None)
        model = build_model(config, torch.float32, torch.device("cpu"), 64, tp)
        model.load_weights(checkpoint.items())
        layer = model.model.layers[1]
        q, k, v = layer.self_attn.qkv_proj.weight.split((32, 16, 16))  # 2 of 4 heads, 1 of 2 KV heads
        assert torch.equal(q, q_all[rank * 32 : (rank + 1) * 32])
        assert torch.equal(k, k_all[rank * 16 : (rank + 1) * 16])
        assert torch.equal(v, v_all[rank * 16 : (rank + 1) * 16])
        gate, up = layer.mlp.gate_up_proj.weight.chunk(2)
        assert torch.equal(gate, gate_all[rank * 64 : (rank + 1) * 64])
        assert torch.equal(up, up_all[rank * 64 : (rank + 1) * 64])
        o_proj = checkpoint["model.layers.1.self_attn.o_proj.weight"]
        assert torch.equal(layer.self_attn.o_proj.weight, o_proj[:, rank * 32 : (rank + 1) * 32])


def test_a_window_as_long_as_the_context_is_dropped(tmp_path: Path) -> None:
    path = write_family_checkpoint(tmp_path / "m", "mistral")
    short = ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64, max_num_reqs=2, max_context_len=8))
    assert all(short.attn.variant(i).sliding_window is None for i in range(2))
    long = ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64, max_num_reqs=2, max_context_len=9))
    assert all(long.attn.variant(i).sliding_window == 8 for i in range(2))
