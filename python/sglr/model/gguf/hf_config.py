"""Hugging Face `config.json` and `generation_config.json` contents from GGUF metadata."""

from __future__ import annotations

from typing import Any

from sglr.errors import GGUFFormatError, GGUFUnsupportedError
from sglr.model.family import Family, GgufLayout, GgufShape
from sglr.model.gguf.dequant import dequantize
from sglr.model.gguf.names import check_layers_complete
from sglr.model.gguf.reader import GGUFCheckpoint
from sglr.model.gguf.rope import llama3_rope_scaling, metadata_rope_scaling
from sglr.model.registry import families

# llama.cpp's defaults where a file leaves a key out.
_DEFAULT_ROPE_THETA = 10_000.0


def gguf_family(checkpoint: GGUFCheckpoint) -> tuple[Family, GgufLayout]:
    """The family the file's architecture (and whether it has experts) declares, and its layout;
    raises `GGUFUnsupportedError` naming any other. A `llama` file with experts is a Mixtral."""
    architecture = checkpoint.architecture
    declared = [(family, family.gguf) for family in families() if family.gguf is not None]
    candidates = [(family, layout) for family, layout in declared if layout.architecture == architecture]
    if not candidates:
        supported = dict.fromkeys(layout.architecture for _, layout in declared)
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: GGUF architecture {architecture!r} is not supported "
            f"(supported: {', '.join(supported)})"
        )
    num_experts = int(checkpoint.arch_get("expert_count", 0) or 0)
    with_experts = [c for c in candidates if c[0].experts is not None]
    if num_experts > 0 and not with_experts:
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: mixture-of-experts {architecture!r} models ({num_experts} experts) are not supported"
        )
    dense = [c for c in candidates if c[0].experts is None]
    # A MoE family's file without experts is refused by its own fields (no expert_count).
    return with_experts[0] if num_experts > 0 or not dense else dense[0]


def build_hf_config(checkpoint: GGUFCheckpoint, torch_dtype: str) -> dict[str, Any]:
    """The `config.json` of the converted checkpoint; validates the architecture, the attention
    geometry and that every layer's tensors are present."""
    family, layout = gguf_family(checkpoint)
    class_name = family.main_architecture
    path = checkpoint.path
    tensors = {tensor.name: tensor for tensor in checkpoint.tensors}

    num_layers = int(checkpoint.arch_require("block_count"))
    hidden_size = int(checkpoint.arch_require("embedding_length"))
    num_heads = int(checkpoint.arch_require("attention.head_count"))
    num_kv_heads = int(checkpoint.arch_get("attention.head_count_kv", num_heads))
    head_dim = int(checkpoint.arch_get("attention.key_length", hidden_size // max(num_heads, 1)))
    value_dim = int(checkpoint.arch_get("attention.value_length", head_dim))
    rotary_dim = int(checkpoint.arch_get("rope.dimension_count", head_dim))
    if num_heads <= 0 or num_kv_heads <= 0 or num_heads % num_kv_heads != 0:
        raise GGUFFormatError(f"{path}: {num_heads} query heads cannot share {num_kv_heads} key/value heads")
    if value_dim != head_dim:
        raise GGUFUnsupportedError(f"{path}: key head dim {head_dim} differs from value head dim {value_dim}")
    if rotary_dim != head_dim:
        raise GGUFUnsupportedError(f"{path}: partial RoPE (rotary dim {rotary_dim} of head dim {head_dim})")
    check_layers_complete(checkpoint.tensor_names(), num_layers, path, layout)

    vocab_size = tensors["token_embd.weight"].shape[0]
    rope_theta = float(checkpoint.arch_get("rope.freq_base", _DEFAULT_ROPE_THETA))
    if "rope_freqs.weight" in tensors:
        rope_scaling = llama3_rope_scaling(dequantize(tensors["rope_freqs.weight"]), rope_theta, rotary_dim)
    else:
        # Old files state linear scaling only as `rope.scale_linear`.
        scale_linear = checkpoint.arch_get("rope.scale_linear")
        rope_scaling = metadata_rope_scaling(
            checkpoint.arch_get("rope.scaling.type", "linear" if scale_linear is not None else None),
            checkpoint.arch_get("rope.scaling.factor", scale_linear),
            checkpoint.arch_get("rope.scaling.original_context_length"),
        )

    config: dict[str, Any] = {
        "architectures": [class_name],
        "model_type": family.architectures[class_name],
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": _intermediate_size(checkpoint),
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(checkpoint.arch_get("context_length", 4096)),
        "rms_norm_eps": float(checkpoint.arch_require("attention.layer_norm_rms_epsilon")),
        "rope_theta": rope_theta,
        "rope_scaling": rope_scaling or None,
        "tie_word_embeddings": "output.weight" not in tensors,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": torch_dtype,
        **_special_token_ids(checkpoint),
    }
    config.update(layout.config_fields(checkpoint, GgufShape(num_layers, hidden_size, num_heads, head_dim)))
    return config


def _intermediate_size(checkpoint: GGUFCheckpoint) -> int:
    """The dense MLP's size; MoE files whose layers are all sparse may state only the experts'."""
    size = checkpoint.arch_get("feed_forward_length", checkpoint.arch_get("expert_feed_forward_length"))
    if size is None:
        checkpoint.arch_require("feed_forward_length")  # raises, naming the key
    return int(size)


def build_generation_config(checkpoint: GGUFCheckpoint) -> dict[str, Any]:
    """Token ids generation needs; `eos_token_id` lists end-of-turn tokens as well, since chat
    models end a reply with those rather than with the end-of-text token."""
    ids = _special_token_ids(checkpoint)
    stop_ids: list[int] = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        token_id = checkpoint.get(f"tokenizer.ggml.{key}")
        if token_id is not None and int(token_id) not in stop_ids:
            stop_ids.append(int(token_id))
    generation: dict[str, Any] = {}
    if "bos_token_id" in ids:
        generation["bos_token_id"] = ids["bos_token_id"]
    if stop_ids:
        generation["eos_token_id"] = stop_ids[0] if len(stop_ids) == 1 else stop_ids
    if "pad_token_id" in ids:
        generation["pad_token_id"] = ids["pad_token_id"]
    return generation


def _special_token_ids(checkpoint: GGUFCheckpoint) -> dict[str, int]:
    ids = {}
    for name, key in (
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
        ("pad_token_id", "padding_token_id"),
    ):
        token_id = checkpoint.get(f"tokenizer.ggml.{key}")
        if token_id is not None:
            ids[name] = int(token_id)
    return ids
