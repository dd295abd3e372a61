"""Gemma 2, Gemma 3 and Phi-3 GGUF files (laid out as llama.cpp's converter writes them, from a
tiny `transformers` checkpoint) convert back to that checkpoint exactly, and run like it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from dense_families import WINDOW, write_family_checkpoint
from gguf_testing import add_trained_tokenizer
from hf_twin import hf_greedy

from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import GGUFUnsupportedError
from sglr.model.gguf import convert_gguf
from sglr.model.runner import ModelRunner, RunnerConfig

# Hugging Face layer suffix -> GGUF suffix (the oracle, written apart from the converter's tables).
_COMMON = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_SPLIT_PROJECTIONS = {
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
}
_GEMMA = {
    **_COMMON,
    **_SPLIT_PROJECTIONS,
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}
LAYER_NAMES = {
    "gemma2": _GEMMA,
    "gemma3": {
        **_GEMMA,
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
    },
    "phi3": {
        **_COMMON,
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "self_attn.qkv_proj.weight": "attn_qkv.weight",
        "mlp.gate_up_proj.weight": "ffn_up.weight",
    },
}
# What llama.cpp's header holds: a plain attention scale (head_dim), a local RoPE base of 10000.
CHECKPOINT_OVERRIDES = {
    "gemma2": {"query_pre_attn_scalar": 16},
    "gemma3": {
        "query_pre_attn_scalar": 16,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
    },
    "phi3": {},
}


def write_gguf(hf_dir: Path, family: str, out: Path, extra_tensors: dict | None = None) -> None:
    from gguf import GGUFWriter
    from safetensors.torch import load_file

    config = json.loads((hf_dir / "config.json").read_text())
    state = load_file(hf_dir / "model.safetensors")
    writer = GGUFWriter(str(out), family)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_rope_dimension_count(config["head_dim"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    if family == "gemma3":
        writer.add_rope_freq_base(1_000_000.0)
        writer.add_rope_scaling_type(__import__("gguf").RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(4.0)
        writer.add_uint32("gemma3.attention.sliding_window_pattern", 2)  # local, global, local
    else:
        writer.add_rope_freq_base(10_000.0)
    if family.startswith("gemma"):
        writer.add_sliding_window(config["sliding_window"])
    if family == "gemma2":
        writer.add_float32("gemma2.attn_logit_softcapping", config["attn_logit_softcapping"])
        writer.add_float32("gemma2.final_logit_softcapping", config["final_logit_softcapping"])
    add_trained_tokenizer(writer, config["vocab_size"])
    for name, tensor in state.items():
        values = tensor.numpy()
        if family.startswith("gemma") and name.endswith("norm.weight"):
            values = values + np.float32(1.0)  # llama.cpp's RMSNorm multiplies by the weight
        writer.add_tensor(_gguf_name(name, family), values)
    for name, values in (extra_tensors or {}).items():
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _gguf_name(hf_name: str, family: str) -> str:
    top = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if hf_name in top:
        return top[hf_name]
    _, _, layer, suffix = hf_name.split(".", 3)
    return f"blk.{layer}.{LAYER_NAMES[family][suffix]}"


@pytest.mark.parametrize("family", ["gemma2", "gemma3", "phi3"])
def test_gguf_converts_back_to_the_checkpoint_and_runs_like_it(tmp_path: Path, family: str) -> None:
    from safetensors.torch import load_file

    original = write_family_checkpoint(tmp_path / "hf", family, **CHECKPOINT_OVERRIDES[family])
    write_gguf(original, family, tmp_path / "tiny.gguf")
    convert_gguf(tmp_path / "tiny.gguf", tmp_path / "converted")
    expected, converted = (
        load_file(original / "model.safetensors"),
        load_file(tmp_path / "converted" / "model.safetensors"),
    )
    assert sorted(converted) == sorted(expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(converted[name], tensor, rtol=0, atol=1e-6, msg=name)
    runner = ModelRunner(
        RunnerConfig(tmp_path / "converted", device="cpu", kv_num_tokens=1024, max_num_reqs=4)
    )
    if family != "phi3":
        assert runner.model.config.family.layer_windows == (WINDOW, None, WINDOW)
    prompts = [np.random.default_rng(0).integers(3, 400, size=n).tolist() for n in (23, 5)]
    assert generate(runner, prompts, 10) == [hf_greedy(original, p, 10) for p in prompts]


def test_phi3_longrope_gguf_is_refused(tmp_path: Path) -> None:
    original = write_family_checkpoint(tmp_path / "hf", "phi3")
    factors = {
        "rope_factors_long.weight": np.ones(8, np.float32),
        "rope_factors_short.weight": np.ones(8, np.float32),
    }
    write_gguf(original, "phi3", tmp_path / "tiny.gguf", factors)
    with pytest.raises(GGUFUnsupportedError, match=r"rope_factors_long|LongRoPE"):
        convert_gguf(tmp_path / "tiny.gguf", tmp_path / "converted")
