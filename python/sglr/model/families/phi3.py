"""Phi-3: the Llama block, stored with fused `qkv_proj` and `gate_up_proj` tensors, and a
sliding window on every layer when the config has one.

sglr fuses the same projections itself, so loading only renames: each fused checkpoint tensor is
split (views, no copy) into the `q/k/v_proj` and `gate/up_proj` pieces a Llama checkpoint would
hold. Under tensor parallelism each piece then goes through the usual per-shard slicing, so a
rank gets its own query, key, value, gate and up rows, never a slice across the fused boundary.
LongRoPE ("longrope"/"su") scaling and partial rotary embeddings are refused by `ModelConfig`;
GGUF files with LongRoPE factors (`rope_factors_long/short`) are refused too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sglr.errors import CheckpointError, GGUFUnsupportedError
from sglr.model.family import DecoderOptions, Family, GgufLayout, GgufShape

Named = tuple[str, Any]


def unfused_tensors(config: Any, weights: Iterable[Named]) -> Iterator[Named]:
    """`weights` with each fused tensor split into its pieces (`config`: the `ModelConfig`)."""
    qkv_sizes = (config.q_size, config.kv_size, config.kv_size)
    mlp_sizes = (config.intermediate_size, config.intermediate_size)
    for name, tensor in weights:
        if ".self_attn.qkv_proj." in name:
            yield from _split(name, tensor, "qkv_proj", ("q_proj", "k_proj", "v_proj"), qkv_sizes)
        elif ".mlp.gate_up_proj." in name:
            yield from _split(name, tensor, "gate_up_proj", ("gate_proj", "up_proj"), mlp_sizes)
        else:
            yield name, tensor


def _split(
    name: str, tensor: Any, fused: str, parts: tuple[str, ...], sizes: tuple[int, ...]
) -> Iterator[Named]:
    if tensor.shape[0] != sum(sizes):
        raise CheckpointError(f"{name}: {tensor.shape[0]} rows, the config implies {sum(sizes)}")
    for part, piece in zip(parts, tensor.split(sizes, dim=0), strict=True):
        yield name.replace(f".{fused}.", f".{part}."), piece


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    if any(name.startswith("rope_factors_") for name in checkpoint.tensor_names()):
        raise GGUFUnsupportedError(f"{checkpoint.path}: Phi-3 LongRoPE scaling is not supported")
    window = checkpoint.arch_get("attention.sliding_window")
    return {"hidden_act": "silu", "sliding_window": None if window is None else int(window)}


FAMILY = Family(
    architectures={"Phi3ForCausalLM": "phi3"},
    decoder=DecoderOptions(checkpoint_renames=unfused_tensors),
    gguf=GgufLayout(
        "phi3",
        # Fused in the file as in Hugging Face's checkpoints (gate rows, then up rows).
        layer_names={
            "attn_qkv.weight": "self_attn.qkv_proj.weight",
            "ffn_up.weight": "mlp.gate_up_proj.weight",
        },
        required=(
            "attn_norm.weight",
            "ffn_norm.weight",
            "attn_qkv.weight",
            "attn_output.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ),
        config_fields=_gguf_fields,
    ),
)
