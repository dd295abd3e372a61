"""GGUF -> Hugging Face conversion on small GGUF files written here with the `gguf` package."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter, quants
from gguf_testing import CORPUS, TinySpec, write_tiny_gguf
from safetensors.numpy import load_file

from sglr.errors import GGUFFormatError, GGUFUnsupportedError, ModelNotFoundError
from sglr.model.gguf import convert_gguf
from sglr.model.gguf.dequant import SUPPORTED_TYPE_NAMES, dequantize
from sglr.model.gguf.reader import read_gguf

T = GGMLQuantizationType

# Byte offsets of the fp16 scale fields in one 256-value K-quant block; the rest are packed
# integers, for which any byte is valid.
K_QUANT_HALF_OFFSETS = {
    T.Q2_K: (80, 82),
    T.Q3_K: (108,),
    T.Q4_K: (0, 2),
    T.Q5_K: (0, 2),
    T.Q6_K: (208,),
}


def convert(tmp_path: Path, spec: TinySpec | None = None, dtype: str = "float32"):
    expected = write_tiny_gguf(tmp_path / "tiny.gguf", spec)
    convert_gguf(tmp_path / "tiny.gguf", tmp_path / "hf", dtype=dtype)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    return expected, config, tmp_path / "hf"


def write_single_tensor(
    path: Path, name: str, data: np.ndarray, ggml_type: GGMLQuantizationType | None
) -> None:
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor(name, data, raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_converted_weights_equal_reference_after_name_mapping_and_unpermute(tmp_path, architecture):
    expected, config, out_dir = convert(
        tmp_path,
        TinySpec(architecture=architecture, pre_tokenizer="gpt2" if architecture == "llama" else "qwen2"),
    )
    weights = load_file(out_dir / "model.safetensors")
    assert set(weights) == set(expected)
    for name, values in expected.items():
        assert weights[name].dtype == np.float32
        np.testing.assert_array_equal(weights[name], values, err_msg=name)
    assert config["model_type"] == architecture
    assert config["tie_word_embeddings"] is True
    assert "lm_head.weight" not in weights


def test_query_rows_stored_by_llama_cpp_come_back_in_hugging_face_order(tmp_path):
    """F32 query weights are stored permuted; the conversion must return the original exactly."""
    expected, _, out_dir = convert(tmp_path)
    weights = load_file(out_dir / "model.safetensors")
    stored = read_gguf(tmp_path / "tiny.gguf")
    stored_q = next(t for t in stored.tensors if t.name == "blk.0.attn_q.weight")
    original = expected["model.layers.0.self_attn.q_proj.weight"]
    assert not np.array_equal(np.asarray(stored_q.data), original)
    np.testing.assert_array_equal(weights["model.layers.0.self_attn.q_proj.weight"], original)


def test_config_from_metadata(tmp_path):
    _, config, out_dir = convert(tmp_path, TinySpec(tied_embeddings=False, num_heads=8, num_kv_heads=2))
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"]) == (2, 64, 96)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (8, 2, 8)
    assert config["rms_norm_eps"] == pytest.approx(1e-6)
    assert config["max_position_embeddings"] == 256
    assert config["tie_word_embeddings"] is False
    assert "lm_head.weight" in load_file(out_dir / "model.safetensors")
    generation = json.loads((out_dir / "generation_config.json").read_text())
    tokenizer_config = json.loads((out_dir / "tokenizer_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"]
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    assert tokenizer_config["bos_token"] == "<|im_start|>"
    assert "<|im_start|>" in tokenizer_config["chat_template"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_run_dtype(tmp_path, dtype):
    import torch
    from safetensors.torch import load_file as load_torch

    expected, config, out_dir = convert(tmp_path, dtype=dtype)
    weights = load_torch(out_dir / "model.safetensors")
    assert config["torch_dtype"] == dtype
    name = "model.layers.1.mlp.up_proj.weight"
    assert weights[name].dtype == getattr(torch, dtype)
    reference = torch.from_numpy(expected[name]).to(getattr(torch, dtype))
    assert torch.equal(weights[name], reference)


def test_unknown_run_dtype_is_refused(tmp_path):
    write_tiny_gguf(tmp_path / "tiny.gguf")
    with pytest.raises(ValueError, match="int8"):
        convert_gguf(tmp_path / "tiny.gguf", tmp_path / "hf", dtype="int8")


@pytest.mark.parametrize("ggml_type", [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1])
def test_dequantize_matches_gguf(tmp_path, ggml_type):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((6, 64)).astype(np.float32)
    stored = values if ggml_type == T.F32 else quants.quantize(values, ggml_type)
    write_single_tensor(
        tmp_path / "one.gguf", "w", stored, None if ggml_type in (T.F32, T.F16) else ggml_type
    )
    (tensor,) = read_gguf(tmp_path / "one.gguf").tensors
    assert tensor.type_name == ggml_type.name
    assert tensor.shape == (6, 64)
    reference = values if ggml_type == T.F32 else quants.dequantize(stored, ggml_type)
    np.testing.assert_array_equal(dequantize(tensor), reference)
    # The quantized values approximate the originals (catches decoding the wrong blocks).
    np.testing.assert_allclose(dequantize(tensor), values, atol=0.6)


@pytest.mark.parametrize("ggml_type", list(K_QUANT_HALF_OFFSETS))
def test_dequantize_k_quants_matches_gguf(tmp_path, ggml_type):
    block_size, type_size = quants.GGML_QUANT_SIZES[ggml_type]
    rng = np.random.default_rng(2)
    num_rows, blocks_per_row = 3, 2
    raw = rng.integers(0, 256, size=(num_rows * blocks_per_row, type_size), dtype=np.uint8)
    for offset in K_QUANT_HALF_OFFSETS[ggml_type]:
        halves = rng.uniform(0.001, 0.1, size=num_rows * blocks_per_row).astype(np.float16)
        raw[:, offset : offset + 2] = halves.view(np.uint8).reshape(-1, 2)
    stored = raw.reshape(num_rows, blocks_per_row * type_size)
    write_single_tensor(tmp_path / "k.gguf", "w", stored, ggml_type)
    (tensor,) = read_gguf(tmp_path / "k.gguf").tensors
    assert tensor.shape == (num_rows, blocks_per_row * block_size)
    decoded = dequantize(tensor)
    assert np.isfinite(decoded).all()
    np.testing.assert_array_equal(decoded, quants.dequantize(stored, ggml_type))


def test_unsupported_tensor_type_is_named(tmp_path):
    assert "IQ4_NL" not in SUPPORTED_TYPE_NAMES
    block_size, type_size = quants.GGML_QUANT_SIZES[T.IQ4_NL]
    raw = np.zeros((4, 64 // block_size * type_size), dtype=np.uint8)
    write_single_tensor(tmp_path / "iq.gguf", "blk.0.attn_q.weight", raw, T.IQ4_NL)
    with pytest.raises(GGUFUnsupportedError, match=r"'blk\.0\.attn_q\.weight'.*IQ4_NL"):
        convert_gguf(tmp_path / "iq.gguf", tmp_path / "hf")


def test_unsupported_architecture_is_named(tmp_path):
    writer = GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFUnsupportedError, match="'mamba'"):
        convert_gguf(tmp_path / "mamba.gguf", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_mixture_of_experts_outside_the_moe_families_is_refused(tmp_path):
    spec = TinySpec(architecture="qwen2", extra_metadata={"qwen2.expert_count": 8})
    write_tiny_gguf(tmp_path / "moe.gguf", spec)
    with pytest.raises(GGUFUnsupportedError, match="mixture-of-experts"):
        convert_gguf(tmp_path / "moe.gguf", tmp_path / "hf")
    # A llama file that announces experts but holds a dense MLP in every layer.
    write_tiny_gguf(tmp_path / "dense.gguf", TinySpec(extra_metadata={"llama.expert_count": 8}))
    with pytest.raises(GGUFFormatError, match="expert"):
        convert_gguf(tmp_path / "dense.gguf", tmp_path / "hf")


def test_unknown_tensor_is_named(tmp_path):
    extra = {"blk.0.ffn_gate_odd.weight": np.zeros((2, 32), dtype=np.float32)}
    write_tiny_gguf(tmp_path / "odd.gguf", TinySpec(extra_tensors=extra))
    with pytest.raises(GGUFUnsupportedError, match="ffn_gate_odd"):
        convert_gguf(tmp_path / "odd.gguf", tmp_path / "hf")


def test_missing_tensor_is_named(tmp_path):
    write_tiny_gguf(tmp_path / "holey.gguf", TinySpec(drop_tensors=("blk.1.ffn_up.weight",)))
    with pytest.raises(GGUFFormatError, match=r"blk\.1\.ffn_up\.weight"):
        convert_gguf(tmp_path / "holey.gguf", tmp_path / "hf")


def test_unknown_pre_tokenizer_is_named(tmp_path):
    write_tiny_gguf(tmp_path / "pre.gguf", TinySpec(pre_tokenizer="made-up-pre"))
    with pytest.raises(GGUFUnsupportedError, match="made-up-pre"):
        convert_gguf(tmp_path / "pre.gguf", tmp_path / "hf")


@pytest.mark.parametrize(
    ("cut", "what"),
    [(0, "empty"), (3, "magic only"), (20, "header"), (700, "metadata"), (-100, "tensor data")],
)
def test_truncated_file_gives_format_error(tmp_path, cut, what):
    """A file cut short anywhere is refused with the file named; `what` names the cut."""
    write_tiny_gguf(tmp_path / "full.gguf")
    data = (tmp_path / "full.gguf").read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data[:cut])
    with pytest.raises(GGUFFormatError, match=r"bad\.gguf"):
        convert_gguf(bad, tmp_path / "hf")


def test_not_a_gguf_file(tmp_path):
    bad = tmp_path / "weights.gguf"
    bad.write_text("this is not a checkpoint at all\n" * 10)
    with pytest.raises(GGUFFormatError, match="not a GGUF file"):
        convert_gguf(bad, tmp_path / "hf")


def test_corrupt_metadata_gives_format_error(tmp_path):
    write_tiny_gguf(tmp_path / "full.gguf")
    data = bytearray((tmp_path / "full.gguf").read_bytes())
    # The first key's length field (after magic, version and the two counts) becomes huge.
    data[24:32] = (2**62).to_bytes(8, "little")
    (tmp_path / "bad.gguf").write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match="corrupt or truncated"):
        convert_gguf(tmp_path / "bad.gguf", tmp_path / "hf")


def test_missing_file(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"nope\.gguf"):
        convert_gguf(tmp_path / "nope.gguf", tmp_path / "hf")


def test_tokenizer_round_trips_text(tmp_path):
    from tokenizers import Tokenizer

    _, _, out_dir = convert(tmp_path)
    tokenizer = Tokenizer.from_file(str(out_dir / "tokenizer.json"))
    for text in [*CORPUS, "<|im_start|>user\nhi<|im_end|>\n", "unseen wörds ✓"]:
        ids = tokenizer.encode(text).ids
        assert tokenizer.decode(ids, skip_special_tokens=False) == text
    # Control tokens stay whole and keep their ids.
    assert tokenizer.encode("<|im_end|>").ids == [tokenizer.token_to_id("<|im_end|>")] == [2]


def test_llama3_rope_frequency_factors_become_rope_scaling(tmp_path):
    """llama.cpp stores Llama 3.1-style RoPE scaling only as per-frequency divisors; the config we
    write must make `transformers` compute the same frequencies."""
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from sglr.model.gguf.rope import llama3_freq_divisors

    head_dim, theta = 16, 10_000.0
    divisors = llama3_freq_divisors(theta, head_dim, factor=8.0, low=1.0, high=4.0, original=8192)
    divisors = divisors.astype(np.float32)
    # Unscaled, smoothed and fully scaled frequencies all occur.
    assert divisors[0] == 1.0 and 1.0 < divisors[6] < 8.0 and divisors[7] == 8.0
    spec = TinySpec(extra_tensors={"rope_freqs.weight": divisors})
    _, config, out_dir = convert(tmp_path, spec)
    assert config["rope_scaling"]["rope_type"] == "llama3"
    assert config["rope_scaling"]["original_max_position_embeddings"] == 8192

    rotary = LlamaRotaryEmbedding(config=AutoConfig.from_pretrained(out_dir))
    base = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    np.testing.assert_allclose(rotary.inv_freq.numpy(), base / divisors, rtol=1e-5)


def test_unrecognised_rope_frequency_factors_are_refused(tmp_path):
    divisors = np.linspace(1.0, 3.0, 8).astype(np.float32)
    write_tiny_gguf(tmp_path / "odd.gguf", TinySpec(extra_tensors={"rope_freqs.weight": divisors}))
    with pytest.raises(GGUFUnsupportedError, match="rope_freqs"):
        convert_gguf(tmp_path / "odd.gguf", tmp_path / "hf")


def test_merge_of_unknown_token_gives_format_error(tmp_path, monkeypatch):
    import gguf_testing

    tokens, merges = gguf_testing.train_vocab()
    monkeypatch.setattr(gguf_testing, "train_vocab", lambda: (tokens, [*merges, "zzz_not_a_token q"]))
    write_tiny_gguf(tmp_path / "bad_merges.gguf")
    with pytest.raises(GGUFFormatError, match="merges"):
        convert_gguf(tmp_path / "bad_merges.gguf", tmp_path / "hf")
