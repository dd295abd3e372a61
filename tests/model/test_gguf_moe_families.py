"""Qwen3, Mixtral, Qwen2-MoE and Qwen3-MoE GGUF files, laid out as llama.cpp's converter writes them
(stacked expert tensors, the router as `ffn_gate_inp`, Qwen2-MoE's shared expert as `*_shexp`,
Mixtral's q/k rows permuted as any `llama` file's), written from a tiny `transformers`
checkpoint: they convert back to that checkpoint exactly and run like it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf_testing import add_trained_tokenizer, llama_cpp_permute
from hf_twin import hf_greedy

from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import GGUFFormatError
from sglr.model.gguf import convert_gguf
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny_families import write_family_checkpoint

# family -> GGUF architecture
ARCHITECTURES = {"qwen3": "qwen3", "mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}
# Hugging Face layer suffix -> GGUF suffix (the oracle, written apart from the converter's tables).
_ATTENTION = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
}
# Expert projection -> stacked GGUF suffix.
_EXPERTS = {
    "w1": "ffn_gate_exps.weight",
    "w3": "ffn_up_exps.weight",
    "w2": "ffn_down_exps.weight",
    "gate_proj": "ffn_gate_exps.weight",
    "up_proj": "ffn_up_exps.weight",
    "down_proj": "ffn_down_exps.weight",
}


def write_gguf(
    hf_dir: Path, family: str, out: Path, legacy_experts: bool = False, drop: tuple[str, ...] = ()
) -> None:
    from gguf import GGUFWriter
    from safetensors.torch import load_file

    config = json.loads((hf_dir / "config.json").read_text())
    state = {name: tensor.numpy() for name, tensor in load_file(hf_dir / "model.safetensors").items()}
    arch = ARCHITECTURES[family]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = GGUFWriter(str(out), arch)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    if family != "qwen3":
        writer.add_expert_count(config.get("num_local_experts") or config["num_experts"])
        writer.add_expert_used_count(config["num_experts_per_tok"])
    if family in ("qwen2_moe", "qwen3_moe"):
        writer.add_expert_feed_forward_length(config["moe_intermediate_size"])
    if family == "qwen2_moe":
        writer.add_expert_shared_feed_forward_length(config["shared_expert_intermediate_size"])
    add_trained_tokenizer(writer, config["vocab_size"])
    stacked: dict[str, dict[int, np.ndarray]] = {}
    for name, values in state.items():
        top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
        if name in top or name == "lm_head.weight":
            writer.add_tensor(top.get(name, "output.weight"), values)
            continue
        _, _, layer, suffix = name.split(".", 3)
        if ".experts." in suffix:
            expert, projection = suffix.split(".experts.")[1].split(".")[:2]
            if legacy_experts:  # old Mixtral files: one tensor per expert
                legacy = {"w1": "gate", "w3": "up", "w2": "down"}[projection]
                writer.add_tensor(f"blk.{layer}.ffn_{legacy}.{expert}.weight", values)
            else:
                stacked.setdefault(f"blk.{layer}.{_EXPERTS[projection]}", {})[int(expert)] = values
            continue
        if arch == "llama" and suffix == "self_attn.q_proj.weight":
            values = llama_cpp_permute(values, heads)
        elif arch == "llama" and suffix == "self_attn.k_proj.weight":
            values = llama_cpp_permute(values, kv_heads)
        if suffix == "mlp.shared_expert_gate.weight":
            values = values.reshape(-1)  # llama.cpp keeps the one gate row as a vector
        writer.add_tensor(f"blk.{layer}.{_ATTENTION[suffix]}", values)
    for name, experts in stacked.items():
        writer.add_tensor(name, np.stack([experts[e] for e in range(len(experts))]))
    for name in drop:
        del writer.tensors[0][name]
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("family", list(ARCHITECTURES))
def test_gguf_converts_back_to_the_checkpoint_and_runs_like_it(tmp_path: Path, family: str) -> None:
    from safetensors.torch import load_file

    original = write_family_checkpoint(tmp_path / "hf", family, seed=1)
    write_gguf(original, family, tmp_path / "tiny.gguf")
    convert_gguf(tmp_path / "tiny.gguf", tmp_path / "converted")
    expected = load_file(original / "model.safetensors")
    converted = load_file(tmp_path / "converted" / "model.safetensors")
    assert sorted(converted) == sorted(expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(converted[name], tensor, rtol=0, atol=0, msg=name)
    config = json.loads((tmp_path / "converted" / "config.json").read_text())
    assert config["architectures"] == json.loads((original / "config.json").read_text())["architectures"]
    runner = ModelRunner(
        RunnerConfig(tmp_path / "tiny.gguf", device="cpu", kv_num_tokens=1024, max_num_reqs=4)
    )
    prompts = [np.random.default_rng(0).integers(3, 400, size=n).tolist() for n in (19, 6)]
    assert generate(runner, prompts, 8) == [hf_greedy(original, p, 8) for p in prompts]


def test_mixtral_files_with_one_tensor_per_expert_convert_alike(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    original = write_family_checkpoint(tmp_path / "hf", "mixtral", seed=2)
    write_gguf(original, "mixtral", tmp_path / "legacy.gguf", legacy_experts=True)
    convert_gguf(tmp_path / "legacy.gguf", tmp_path / "converted")
    expected = load_file(original / "model.safetensors")
    converted = load_file(tmp_path / "converted" / "model.safetensors")
    assert sorted(converted) == sorted(expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(converted[name], tensor, rtol=0, atol=0, msg=name)


def test_a_moe_file_missing_its_router_is_a_format_error(tmp_path: Path) -> None:
    original = write_family_checkpoint(tmp_path / "hf", "qwen3_moe", seed=3)
    write_gguf(original, "qwen3_moe", tmp_path / "broken.gguf", drop=("blk.1.ffn_gate_inp.weight",))
    with pytest.raises(GGUFFormatError, match=r"no tensor 'blk\.1\.ffn_gate_inp\.weight'"):
        convert_gguf(tmp_path / "broken.gguf", tmp_path / "converted")


def test_quantized_stacked_experts_dequantize_per_expert_and_load_quantized(
    tmp_path: Path, monkeypatch
) -> None:
    """Q8_0 stacked experts (3-D blocks) convert to each expert's dequantized rows; by default
    the file runs quantized (its attention and shared-expert linears kept as Q8_0 / Q4_0 blocks)."""
    from gguf import GGMLQuantizationType, GGUFWriter, quants
    from safetensors.torch import load_file

    from sglr.model.layers import Linear

    add_tensor = GGUFWriter.add_tensor
    stored = {}

    def add_quantized(self, name, values, *args, **kwargs):
        if values.ndim < 2 or values.shape[-1] % 32 or "token_embd" in name or "ffn_gate_inp" in name:
            return add_tensor(self, name, values, *args, **kwargs)
        kind = GGMLQuantizationType.Q4_0 if name.endswith("attn_q.weight") else GGMLQuantizationType.Q8_0
        stored[name] = (quants.quantize(values, kind), kind)
        return add_tensor(self, name, stored[name][0], raw_dtype=kind)

    monkeypatch.setattr(GGUFWriter, "add_tensor", add_quantized)
    original = write_family_checkpoint(tmp_path / "hf", "qwen2_moe", seed=4)
    write_gguf(original, "qwen2_moe", tmp_path / "q.gguf")
    convert_gguf(tmp_path / "q.gguf", tmp_path / "converted")
    converted = load_file(tmp_path / "converted" / "model.safetensors")
    blocks, kind = stored["blk.0.ffn_down_exps.weight"]
    experts = quants.dequantize(blocks, kind)
    assert experts.ndim == 3
    for e, values in enumerate(experts):
        np.testing.assert_array_equal(
            converted[f"model.layers.0.mlp.experts.{e}.down_proj.weight"].numpy(), values
        )
    runner = ModelRunner(RunnerConfig(tmp_path / "q.gguf", device="cpu", kv_num_tokens=512, max_num_reqs=2))
    assert runner.weights_format == "quantized"
    kept = [m.quantized.type_names for m in runner.model.modules() if isinstance(m, Linear) and m.quantized]
    assert ["Q4_0", "Q8_0", "Q8_0"] in kept  # a q/k/v of two formats, stacked
    assert len(generate(runner, [[5, 6, 7]], 4)[0]) == 4
