"""Qwen2-MoE: Qwen2 attention (q/k/v biases unless `qkv_bias` is false) and, on sparse layers, a
MoE block with a shared expert behind a sigmoid gate; `decoder_sparse_step` and
`mlp_only_layers` leave some layers with a dense MLP (of `intermediate_size`).

The Qwen MoE families name their experts `num_experts` (`num_local_experts` in Qwen3-MoE
configs) and size them with `moe_intermediate_size`. GGUF (`qwen2moe`): stacked experts as
Mixtral's, the shared expert as `ffn_*_shexp` with its gate `ffn_gate_inp_shexp` (a vector of
`hidden` values; Hugging Face stores one row).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sglr.errors import GGUFFormatError
from sglr.model.families.qwen2 import QWEN_RULES, no_window_fields, require_qwen2_biases
from sglr.model.family import GGUF_EXPERT, DecoderOptions, Family, GgufLayout, GgufShape
from sglr.model.family_options import RawConfig
from sglr.model.moe_config import MoEConfig

QWEN_EXPERT_NAMES = {
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "ffn_gate_exps.weight": f"mlp.experts.{GGUF_EXPERT}.gate_proj.weight",
    "ffn_up_exps.weight": f"mlp.experts.{GGUF_EXPERT}.up_proj.weight",
    "ffn_down_exps.weight": f"mlp.experts.{GGUF_EXPERT}.down_proj.weight",
}
_SHARED_EXPERT_NAMES = {
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
}


def read_qwen_experts(raw: RawConfig, shared_expert: bool) -> MoEConfig:
    """The experts of a Qwen MoE `config.json` (with a shared expert: Qwen2-MoE's)."""
    num_experts_per_tok = int(raw["num_experts_per_tok"])
    # transformers writes `num_experts` for Qwen2-MoE and `num_local_experts` for Qwen3-MoE.
    num_experts = raw.get("num_experts", raw.get("num_local_experts"))
    if num_experts is None:
        raise KeyError("num_experts")
    shared = int(raw["shared_expert_intermediate_size"]) if shared_expert else 0
    return MoEConfig(
        num_experts=int(num_experts),
        num_experts_per_tok=num_experts_per_tok,
        expert_intermediate_size=int(raw["moe_intermediate_size"]),
        norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
        shared_expert_intermediate_size=shared,
        decoder_sparse_step=int(raw.get("decoder_sparse_step", 1)),
        mlp_only_layers=tuple(int(i) for i in raw.get("mlp_only_layers") or ()),
    )


def qwen_expert_fields(checkpoint: Any, num_layers: int, renormalize: bool) -> dict[str, Any]:
    """A Qwen MoE GGUF file's expert fields; `renormalize`: llama.cpp's routing when the file
    does not say (`expert_weights_norm`)."""
    from sglr.model.gguf.moe import read_experts  # the gguf package: imported to convert a file

    num_experts, top_k, sparse = read_experts(checkpoint, num_layers)
    expert_size = checkpoint.arch_get("expert_feed_forward_length")
    if expert_size is None:
        raise GGUFFormatError(
            f"{checkpoint.path}: {checkpoint.architecture} file without expert_feed_forward_length"
        )
    return {
        "num_experts": num_experts,
        "num_experts_per_tok": top_k,
        "moe_intermediate_size": int(expert_size),
        "norm_topk_prob": bool(checkpoint.arch_get("expert_weights_norm", renormalize)),
        "decoder_sparse_step": 1,
        "mlp_only_layers": [i for i in range(num_layers) if not sparse[i]],
        **no_window_fields(num_layers),
    }


def _qkv_bias(raw: RawConfig) -> bool:
    return bool(raw.get("qkv_bias", True)) or bool(raw.get("attention_bias", False))


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    require_qwen2_biases(checkpoint, shape.num_layers)
    # llama.cpp keeps Qwen2-MoE's top-k softmax weights as they are.
    fields = qwen_expert_fields(checkpoint, shape.num_layers, renormalize=False)
    size = checkpoint.arch_get("expert_shared_feed_forward_length")
    has_shared = any(name.endswith("ffn_gate_shexp.weight") for name in checkpoint.tensor_names())
    fields["shared_expert_intermediate_size"] = int(size) if size is not None and has_shared else 0
    return {**fields, "qkv_bias": True}


FAMILY = Family(
    architectures={"Qwen2MoeForCausalLM": "qwen2_moe"},
    config=dataclasses.replace(QWEN_RULES, attention_bias=_qkv_bias),
    decoder=DecoderOptions(prepack_on_cpu=True),
    experts=lambda raw: read_qwen_experts(raw, shared_expert=True),
    gguf=GgufLayout(
        "qwen2moe", layer_names={**QWEN_EXPERT_NAMES, **_SHARED_EXPERT_NAMES}, config_fields=_gguf_fields
    ),
)
