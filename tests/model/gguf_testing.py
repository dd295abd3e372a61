"""Writes small GGUF checkpoints with the `gguf` package, the way llama.cpp's converter lays them
out, and returns what a correct conversion back to Hugging Face format must produce."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, quants
from kquant_testing import K_TYPES, quantize_k

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "I counted 12 apples, 345 pears and 6789 plums in 2024.",
    "Hello world! hello World? HELLO, world... it's a test; they're here.",
    "naïve café, déjà vu, straße, 日本語のテキスト, emoji 🙂 and tabs\tand\nnew lines.",
    "def add(a, b):\n    return a + b  # two spaces\n\n",
]

# Each layer tensor, its GGUF suffix and Hugging Face suffix (written independently of the
# converter's own table, as the oracle).
LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
QWEN2_BIASES = {
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
}
T = GGMLQuantizationType


# Every layer matrix 4-bit (both block formats), Q8_0 tied embeddings: a fully quantized model.
ALL_4BIT = {
    "token_embd.weight": T.Q8_0,
    "attn_q.weight": T.Q4_0,
    "attn_k.weight": T.Q4_1,
    "attn_v.weight": T.Q4_1,
    "attn_output.weight": T.Q4_0,
    "ffn_gate.weight": T.Q4_0,
    "ffn_up.weight": T.Q4_1,
    "ffn_down.weight": T.Q4_1,
}


@dataclass
class TinySpec:
    architecture: str = "llama"
    num_layers: int = 2
    hidden_size: int = 64
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 96
    tied_embeddings: bool = True
    pre_tokenizer: str = "gpt2"
    add_bos: bool = False
    # GGUF suffix -> storage type; anything not listed is F32.
    tensor_types: dict[str, GGMLQuantizationType] = field(
        default_factory=lambda: {
            "token_embd.weight": T.Q8_0,
            "output.weight": T.Q8_0,
            "attn_k.weight": T.Q4_1,
            "attn_v.weight": T.Q8_0,
            "attn_output.weight": T.F16,
            "ffn_gate.weight": T.Q4_0,
            "ffn_up.weight": T.Q4_1,
            "ffn_down.weight": T.Q8_0,
        }
    )
    drop_tensors: tuple[str, ...] = ()
    # Standard deviation of the random matrices (norm weights are 1 + N(0, 1)): at a larger hidden
    # size a smaller one keeps each layer's gain near 1, so low-precision errors are not amplified.
    weight_scale: float = 0.3
    extra_tensors: dict[str, np.ndarray] = field(default_factory=dict)
    extra_metadata: dict[str, object] = field(default_factory=dict)


def train_vocab(vocab_size: int = 420) -> tuple[list[str], list[str]]:
    """A byte-level BPE vocabulary (tokens in id order, specials first) and its merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def add_trained_tokenizer(writer, vocab_size: int) -> list[str]:
    """The trained byte-level BPE vocabulary padded with `<unusedN>` tokens to `vocab_size`, as a
    GGUF tokenizer (`gpt2` model and pre-tokenizer, `<|im_end|>` as end of sequence); returns
    the tokens."""
    tokens, merges = train_vocab()
    tokens += [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL_TOKENS or t.startswith("<unused") else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    return tokens


def llama_cpp_permute(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """What llama.cpp's converter does to Hugging Face q/k rows (the forward direction)."""
    head_rows = weight.shape[0] // num_heads
    return (
        weight.reshape(num_heads, 2, head_rows // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)
    )


def _hf_shape(suffix: str, spec: TinySpec, vocab_size: int) -> tuple[int, ...]:
    head_dim = spec.hidden_size // spec.num_heads
    q_len, kv_len = spec.num_heads * head_dim, spec.num_kv_heads * head_dim
    return {
        "attn_norm.weight": (spec.hidden_size,),
        "ffn_norm.weight": (spec.hidden_size,),
        "attn_q.weight": (q_len, spec.hidden_size),
        "attn_k.weight": (kv_len, spec.hidden_size),
        "attn_v.weight": (kv_len, spec.hidden_size),
        "attn_output.weight": (spec.hidden_size, q_len),
        "ffn_gate.weight": (spec.intermediate_size, spec.hidden_size),
        "ffn_up.weight": (spec.intermediate_size, spec.hidden_size),
        "ffn_down.weight": (spec.hidden_size, spec.intermediate_size),
        "attn_q.bias": (q_len,),
        "attn_k.bias": (kv_len,),
        "attn_v.bias": (kv_len,),
        "token_embd.weight": (vocab_size, spec.hidden_size),
        "output.weight": (vocab_size, spec.hidden_size),
        "output_norm.weight": (spec.hidden_size,),
    }[suffix]


def _stored_and_expected(values: np.ndarray, ggml_type: GGMLQuantizationType, permute_heads: int | None):
    """(array to write, Hugging Face values a correct converter returns). Quantization works on
    blocks within a row, so quantizing the permuted rows equals permuting the quantized rows."""
    stored = llama_cpp_permute(values, permute_heads) if permute_heads else values
    if ggml_type == T.F32:
        return stored, values
    quantize = (
        (lambda v: quantize_k(v, ggml_type))
        if ggml_type in K_TYPES
        else (lambda v: quants.quantize(v, ggml_type))
    )
    return quantize(stored), quants.dequantize(quantize(values), ggml_type)


def write_tiny_gguf(path: Path, spec: TinySpec | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Writes a random-weight GGUF checkpoint; returns Hugging Face name -> expected float32 values."""
    spec = spec or TinySpec()
    rng = np.random.default_rng(seed)
    tokens, merges = train_vocab()
    arch = spec.architecture
    head_dim = spec.hidden_size // spec.num_heads
    writer = GGUFWriter(str(path), arch)
    writer.add_block_count(spec.num_layers)
    writer.add_context_length(256)
    writer.add_embedding_length(spec.hidden_size)
    writer.add_feed_forward_length(spec.intermediate_size)
    writer.add_head_count(spec.num_heads)
    writer.add_head_count_kv(spec.num_kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(spec.pre_tokenizer)
    writer.add_token_list(tokens)
    writer.add_token_types([3 if token in SPECIAL_TOKENS else 1 for token in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|im_start|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(spec.add_bos)
    writer.add_chat_template(CHATML_TEMPLATE)
    for key, value in spec.extra_metadata.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_uint32(key, int(value))

    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    if not spec.tied_embeddings:
        names["output.weight"] = "lm_head.weight"
    layer_tensors = dict(LAYER_TENSORS, **(QWEN2_BIASES if arch == "qwen2" else {}))
    for layer in range(spec.num_layers):
        for suffix, hf_suffix in layer_tensors.items():
            names[f"blk.{layer}.{suffix}"] = f"model.layers.{layer}.{hf_suffix}"

    expected = {}
    for gguf_name, hf_name in names.items():
        if gguf_name in spec.drop_tensors:
            continue
        suffix = gguf_name.split(".", 2)[-1] if gguf_name.startswith("blk.") else gguf_name
        shape = _hf_shape(suffix, spec, len(tokens))
        scale = 1.0 if suffix.endswith("norm.weight") else spec.weight_scale
        values = (
            rng.standard_normal(shape) * scale + (1.0 if suffix.endswith("norm.weight") else 0.0)
        ).astype(np.float32)
        permute_heads = None
        if arch == "llama" and suffix.startswith("attn_q."):
            permute_heads = spec.num_heads
        elif arch == "llama" and suffix.startswith("attn_k."):
            permute_heads = spec.num_kv_heads
        ggml_type = spec.tensor_types.get(suffix, T.F32) if len(shape) == 2 else T.F32
        stored, expected[hf_name] = _stored_and_expected(values, ggml_type, permute_heads)
        writer.add_tensor(gguf_name, stored, raw_dtype=None if ggml_type in (T.F32, T.F16) else ggml_type)
    for gguf_name, values in spec.extra_tensors.items():
        writer.add_tensor(gguf_name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return expected
