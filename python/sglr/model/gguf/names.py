"""GGUF tensor names -> Hugging Face (Llama module) names, with each family's own names from its
`GgufLayout`, and undoing llama.cpp's reordering of the query and key rows.

Hugging Face Llama checkpoints apply RoPE to the two halves of each head ("rotate half");
llama.cpp rotates adjacent pairs instead, so its converter reorders the rows of `q_proj` and
`k_proj` of the `llama` architecture: within each head, row `i` of the first half and row `i` of
the second half become rows `2i` and `2i + 1`. `unpermute_rope_rows` puts them back. The
`qwen2` architecture runs the half-split rotation in llama.cpp as well, so its rows are stored
as they are.
"""

from __future__ import annotations

import re

import numpy as np

from sglr.errors import GGUFFormatError, GGUFUnsupportedError
from sglr.model.family import GGUF_ATTENTION_REQUIRED, GgufLayout
from sglr.model.gguf.moe import is_sparse_layer, stored_moe_shape

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}

# GGUF layer suffix -> Hugging Face layer suffix, for the Llama tensors (`GgufLayout.layer_names`
# adds a family's own).
LLAMA_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.bias": "self_attn.o_proj.bias",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}

# A MoE layer's tensors besides its attention's own (q/k norms): its norms, attention and router.
_MOE_LAYER_REQUIRED = (*GGUF_ATTENTION_REQUIRED, "ffn_gate_inp.weight")

# Tensors llama.cpp derives and Hugging Face does not store: precomputed RoPE frequency factors
# (folded into the config as `rope_scaling`) and old files' rotary tables.
_DERIVED_NAMES = {"rope_freqs.weight"}
_DERIVED_LAYER_SUFFIXES = {"attn_rot_embd"}

_LAYER_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_tensor_name(gguf_name: str, layout: GgufLayout) -> str | None:
    """The Hugging Face name for a GGUF tensor of a family laid out as `layout`, or None for a
    tensor that has no counterpart in a Hugging Face checkpoint. Raises `GGUFUnsupportedError`
    for a tensor sglr does not know, rather than silently dropping it."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    if gguf_name in _DERIVED_NAMES:
        return None
    match = _LAYER_RE.match(gguf_name)
    if match is not None:
        layer_id, suffix = int(match.group(1)), match.group(2)
        name = layout.layer_names.get(suffix, LLAMA_LAYER_NAMES.get(suffix))
        if name is None and layout.layer_name is not None:
            name = layout.layer_name(suffix)
        if name is not None:
            return f"model.layers.{layer_id}.{name}"
        if suffix.rsplit(".", 1)[0] in _DERIVED_LAYER_SUFFIXES:
            return None
    raise GGUFUnsupportedError(
        f"GGUF tensor {gguf_name!r} has no counterpart in sglr's {layout.architecture} modules"
    )


def check_layers_complete(
    tensor_names: frozenset[str], num_layers: int, path: object, layout: GgufLayout
) -> None:
    """Raises `GGUFFormatError` naming the first missing tensor, so a damaged file fails here
    rather than as a shape error at load time."""
    suffixes = layout.required
    qk_norms = tuple(s for s in suffixes if s.startswith(("attn_q_norm", "attn_k_norm")))
    if num_layers < 0:
        raise GGUFFormatError(f"{path}: GGUF metadata gives {num_layers} layers")
    _check_present(tensor_names, ["token_embd.weight", "output_norm.weight"], path)
    # Every layer has a tensor of its own: past the tensor count a layer is missing, found
    # without walking a forged count (2**31 layers' names took all memory).
    for i in range(min(num_layers, len(tensor_names) + 1)):
        if is_sparse_layer(tensor_names, i):
            required = [f"blk.{i}.{suffix}" for suffix in (*_MOE_LAYER_REQUIRED, *qk_norms)]
            if f"blk.{i}.ffn_gate_exps.weight" not in tensor_names:
                required.append(f"blk.{i}.ffn_gate.0.weight")  # older files: one tensor per expert
        else:
            required = [f"blk.{i}.{suffix}" for suffix in suffixes]
        _check_present(tensor_names, required, path)
    for name in tensor_names:
        match = _LAYER_RE.match(name)
        if match is not None and int(match.group(1)) >= num_layers:
            raise GGUFFormatError(f"{path}: tensor {name!r} lies beyond the {num_layers} layers in metadata")


def _check_present(tensor_names: frozenset[str], required: list[str], path: object) -> None:
    for name in required:
        if name not in tensor_names:
            raise GGUFFormatError(f"{path}: GGUF file has no tensor {name!r}")


def unpermute_rope_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Reorders the rows (dim 0) of a `llama` GGUF query/key weight or bias from llama.cpp's
    interleaved-pair layout back to Hugging Face's half-split layout."""
    num_rows = weight.shape[0]
    if num_rows % (2 * num_heads) != 0:
        raise GGUFFormatError(
            f"a query/key tensor with {num_rows} rows cannot be split into {num_heads} heads"
        )
    half_head_dim = num_rows // num_heads // 2
    rest = weight.shape[1:]
    # [heads, half_head_dim, 2, ...] -> [heads, 2, half_head_dim, ...]
    pairs = weight.reshape(num_heads, half_head_dim, 2, *rest)
    return np.ascontiguousarray(pairs.swapaxes(1, 2)).reshape(weight.shape)


def expected_hf_shape(hf_name: str, config: dict) -> tuple[int, ...]:
    """The shape a module expects for `hf_name`, from the converted config (MoE tensors: as the
    file stores them, `sglr.model.gguf.moe.stored_moe_shape`)."""
    moe_shape = stored_moe_shape(hf_name, config)
    if moe_shape is not None:
        return moe_shape
    hidden = config["hidden_size"]
    q_len = config["num_attention_heads"] * config["head_dim"]
    kv_len = config["num_key_value_heads"] * config["head_dim"]
    ffn = config["intermediate_size"]
    by_suffix = {  # first match wins: "qkv_proj.weight" also ends with "v_proj.weight"
        # Per-head q/k norms (Qwen3, Gemma 3); Phi-3's fused tensors.
        "q_norm.weight": (config["head_dim"],),
        "k_norm.weight": (config["head_dim"],),
        "qkv_proj.weight": (q_len + 2 * kv_len, hidden),
        "gate_up_proj.weight": (2 * ffn, hidden),
        "embed_tokens.weight": (config["vocab_size"], hidden),
        "lm_head.weight": (config["vocab_size"], hidden),
        "norm.weight": (hidden,),
        "layernorm.weight": (hidden,),
        "q_proj.weight": (q_len, hidden),
        "k_proj.weight": (kv_len, hidden),
        "v_proj.weight": (kv_len, hidden),
        "o_proj.weight": (hidden, q_len),
        "q_proj.bias": (q_len,),
        "k_proj.bias": (kv_len,),
        "v_proj.bias": (kv_len,),
        "o_proj.bias": (hidden,),
        "gate_proj.weight": (ffn, hidden),
        "up_proj.weight": (ffn, hidden),
        "down_proj.weight": (hidden, ffn),
    }
    for suffix, shape in by_suffix.items():
        if hf_name.endswith(suffix):
            return shape
    raise KeyError(hf_name)
