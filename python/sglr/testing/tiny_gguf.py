"""Tiny quantized GGUF files written from a Hugging Face checkpoint of a dense family with a GGUF
layout (Llama, Qwen2, Qwen3, ...), named and laid out as the family declares (llama.cpp's q/k row
order for `llama` files): for tests and benchmarks of the quantized CPU paths
(`gguf_weights="quantized"`, the fused decode step) on those families. The names come from the
declarations, so these files test the paths that run a model, not the name conversion (the
conversion tests write their files from tables of their own).

Every matrix whose rows split into whole blocks is stored in `matrix_type` (Q4_0, Q8_0, ...),
norms and biases as float32; the tokenizer is the checkpoint's own (`tokenizer.json`).

    path = write_quantized_gguf(tiny_model_path("llama"), tmp_path / "llama.gguf", "Q4_0")
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def write_quantized_gguf(hf_dir: Path, out: Path, matrix_type: str = "Q4_0") -> Path:
    """Writes the checkpoint at `hf_dir` as the GGUF file `out` and returns `out`."""
    from gguf import GGMLQuantizationType, GGUFWriter, quants
    from safetensors.numpy import load_file

    from sglr.model.gguf.names import LLAMA_LAYER_NAMES
    from sglr.model.registry import family_of

    config = json.loads((Path(hf_dir) / "config.json").read_text())
    layout = family_of(config["architectures"][0]).gguf
    if layout is None:
        raise ValueError(f"{config['architectures'][0]} has no GGUF layout")
    arch = layout.architecture
    gguf_suffix = {hf: suffix for suffix, hf in {**LLAMA_LAYER_NAMES, **layout.layer_names}.items()}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = GGUFWriter(str(out), arch)
    theta = (config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta", 10_000.0)
    for key, value in {
        "block_count": config["num_hidden_layers"],
        "context_length": config["max_position_embeddings"],
        "embedding_length": config["hidden_size"],
        "feed_forward_length": config["intermediate_size"],
        "attention.head_count": heads,
        "attention.head_count_kv": kv_heads,
        "attention.key_length": head_dim,
        "attention.value_length": head_dim,
        "rope.dimension_count": head_dim,
    }.items():
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", config["rms_norm_eps"])
    writer.add_float32(f"{arch}.rope.freq_base", float(theta))
    _add_tokenizer(writer, Path(hf_dir), config["vocab_size"])
    kind = GGMLQuantizationType[matrix_type]
    block_len = quants.GGML_QUANT_SIZES[kind][0]
    for name, values in load_file(Path(hf_dir) / "model.safetensors").items():
        values = values.astype(np.float32)
        if name in _TOP_NAMES:
            gguf_name = _TOP_NAMES[name]
        else:
            _, _, layer, suffix = name.split(".", 3)
            gguf_name = f"blk.{layer}.{gguf_suffix[suffix]}"
            if layout.rope_rows_permuted and suffix in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                values = _llama_cpp_permute(values, heads if ".q_proj." in suffix else kv_heads)
        if values.ndim == 2 and values.shape[1] % block_len == 0:
            writer.add_tensor(gguf_name, quants.quantize(values, kind), raw_dtype=kind)
        else:
            writer.add_tensor(gguf_name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(out)


def _llama_cpp_permute(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """llama.cpp's reordering of `llama` q/k rows: each head's two halves interleaved in pairs."""
    head_rows = weight.shape[0] // num_heads
    pairs = weight.reshape(num_heads, 2, head_rows // 2, *weight.shape[1:])
    return pairs.swapaxes(1, 2).reshape(weight.shape)


def _add_tokenizer(writer, hf_dir: Path, vocab_size: int) -> None:
    """The checkpoint's byte-level BPE tokenizer (`gpt2` model and pre-tokenizer), padded with
    `<unusedN>` tokens to the vocabulary size."""
    tokenizer = json.loads((hf_dir / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    tokens += [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    specials = {added["content"] for added in tokenizer.get("added_tokens", [])}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in specials or t.startswith("<unused") else 1 for t in tokens])
    writer.add_token_merges(merges)
    if "<|im_end|>" in vocab:
        writer.add_eos_token_id(vocab["<|im_end|>"])
