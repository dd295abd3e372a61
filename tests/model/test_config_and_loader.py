"""config.json parsing (both dialects), RoPE frequencies, and checkpoint loading edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from sglr.errors import CheckpointError, ModelConfigError, ModelNotFoundError
from sglr.model.config import ModelConfig, load_model_config
from sglr.model.loader import resolve_checkpoint_dir
from sglr.model.rope import compute_inv_freq
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import write_tiny_model

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "eos_token_id": [128001, 128008, 128009],
}


def test_llama3_config_reads_shapes_and_rope_scaling() -> None:
    config = ModelConfig.from_dict(LLAMA3_8B)
    assert (config.head_dim, config.num_key_value_heads, config.q_size, config.kv_size) == (
        128,
        8,
        4096,
        1024,
    )
    assert config.rope_scaling.rope_type == "llama3"
    assert config.rope_scaling.original_max_position_embeddings == 8192
    assert config.eos_token_ids == (128001, 128008, 128009)
    assert not config.attention_bias
    assert 8.0e9 < config.num_params < 8.1e9


def test_new_rope_parameters_dialect_reads_the_same() -> None:
    new = {k: v for k, v in LLAMA3_8B.items() if k not in ("rope_theta", "rope_scaling", "torch_dtype")}
    new["rope_parameters"] = {**LLAMA3_8B["rope_scaling"], "rope_theta": 500000.0}
    new["dtype"] = "bfloat16"
    assert ModelConfig.from_dict(new) == ModelConfig.from_dict(LLAMA3_8B)


def test_qwen2_config_has_attention_bias_and_an_optional_sliding_window() -> None:
    raw = {**LLAMA3_8B, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_scaling": None}
    assert ModelConfig.from_dict(raw).attention_bias
    off = {**raw, "use_sliding_window": False, "sliding_window": 4096}
    assert ModelConfig.from_dict(off).family.layer_windows == ()
    on = {**raw, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 28}
    assert ModelConfig.from_dict(on).family.layer_windows == (None,) * 28 + (4096,) * 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"architectures": ["FooForCausalLM"]}, "unsupported architecture"),
        ({"num_key_value_heads": 5}, "multiple of"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "unsupported rope scaling"),
        ({"hidden_size": None}, "hidden_size"),
    ],
)
def test_bad_configs_raise_model_config_error(change: dict, message: str) -> None:
    raw = {**LLAMA3_8B, **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ModelConfigError, match=message):
        ModelConfig.from_dict(raw)


@pytest.mark.parametrize(
    "rope_scaling", [None, LLAMA3_8B["rope_scaling"], {"rope_type": "linear", "factor": 4.0}]
)
def test_inv_freq_matches_transformers(rope_scaling: dict | None) -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    raw = {**LLAMA3_8B, "rope_scaling": rope_scaling}
    ours = compute_inv_freq(ModelConfig.from_dict(raw))
    hf_config = LlamaConfig(**{k: v for k, v in raw.items() if k not in ("architectures", "model_type")})
    rope_type = (rope_scaling or {}).get("rope_type", "default")
    if rope_type == "default":
        expected = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128))
    else:
        expected, _ = ROPE_INIT_FUNCTIONS[rope_type](hf_config, "cpu")
    torch.testing.assert_close(ours, expected.float(), rtol=1e-6, atol=0)
    if rope_type == "llama3":
        # The three regimes are all present for these shapes: kept, stretched, and blended.
        base = compute_inv_freq(ModelConfig.from_dict({**raw, "rope_scaling": None}))
        ratio = ours / base
        assert (ratio == 1).any() and (ratio == 1 / 8).any() and ((ratio > 1 / 8) & (ratio < 1)).any()


def test_missing_config_and_missing_weights_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match=r"no config\.json"):
        load_model_config(tmp_path)
    path = write_tiny_model(tmp_path / "m", "llama")
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors"):
        ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64))


def test_checkpoint_lacking_a_tensor_names_it(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "m", "qwen2")
    tensors = load_file(path / "model.safetensors")
    del tensors["model.layers.1.self_attn.k_proj.bias"]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model.layers.1.self_attn.qkv_proj.bias\[k\]"):
        ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64))


def test_checkpoint_with_wrong_shape_or_unknown_tensor_is_rejected(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "m", "llama")
    tensors = load_file(path / "model.safetensors")
    tensors["model.layers.0.mlp.up_proj.weight"] = tensors["model.layers.0.mlp.up_proj.weight"][:-1]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"up_proj\.weight: checkpoint shape"):
        ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64))
    tensors = load_file(write_tiny_model(tmp_path / "n", "llama") / "model.safetensors")
    tensors["model.extra.weight"] = torch.zeros(2)
    save_file(tensors, str(tmp_path / "n" / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model\.extra\.weight"):
        ModelRunner(RunnerConfig(tmp_path / "n", device="cpu", kv_num_tokens=64))


def test_sharded_bf16_checkpoint_loads_the_same_weights_cast_to_fp32(tmp_path: Path) -> None:
    single = write_tiny_model(tmp_path / "single", "llama", seed=3, dtype="bfloat16")
    sharded = write_tiny_model(tmp_path / "sharded", "llama", seed=3, dtype="bfloat16", num_shards=4)
    assert len(list(sharded.glob("model-*.safetensors"))) == 4
    a = ModelRunner(RunnerConfig(single, device="cpu", dtype="float32", kv_num_tokens=64)).model
    b = ModelRunner(RunnerConfig(sharded, device="cpu", dtype="float32", kv_num_tokens=64)).model
    assert next(a.parameters()).dtype == torch.float32
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name
    fused = a.model.layers[0].self_attn.qkv_proj.weight
    reference = load_file(single / "model.safetensors")["model.layers.0.self_attn.k_proj.weight"]
    start, size = a.model.layers[0].self_attn.qkv_proj.shard_offsets["k"]
    assert torch.equal(fused[start : start + size], reference.float())


def test_sharded_index_listing_a_missing_shard_is_an_error(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "m", "llama", num_shards=2)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert "model-00002-of-00002.safetensors" in index["weight_map"].values()
    (path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing shard"):
        ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=64))


def test_dummy_load_format_needs_only_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA3_8B, "num_hidden_layers": 1, "vocab_size": 1000,
                                                      "hidden_size": 64, "intermediate_size": 96,
                                                      "num_attention_heads": 4, "num_key_value_heads": 2}))  # fmt: skip
    runner = ModelRunner(
        RunnerConfig(tmp_path, device="cpu", load_format="dummy", kv_num_tokens=64, max_context_len=128)
    )
    weights = dict(runner.model.named_parameters())
    assert weights["model.norm.weight"].eq(1).all()
    assert 0.015 < float(weights["model.layers.0.mlp.gate_up_proj.weight"].std()) < 0.025
    again = ModelRunner(
        RunnerConfig(tmp_path, device="cpu", load_format="dummy", kv_num_tokens=64, max_context_len=128)
    )
    assert torch.equal(again.model.model.embed_tokens.weight, runner.model.model.embed_tokens.weight)


def test_model_path_that_names_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_checkpoint_dir(tmp_path / "nope")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_checkpoint_dir("not/a/hub/id")
    with pytest.raises(ModelNotFoundError):
        ModelRunner(RunnerConfig(tmp_path / "nope", device="cpu"))
