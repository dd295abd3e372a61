"""What mixture-of-experts GGUF files add to the conversion: Mixtral (the `llama` architecture with
`expert_count` > 0), `qwen2moe` and `qwen3moe`.

llama.cpp stores a layer's routed experts as three stacked tensors, `ffn_gate_exps`, `ffn_up_exps`
and `ffn_down_exps` (`[experts, rows, cols]` in row-major order), the router as `ffn_gate_inp`,
and Qwen2-MoE's shared expert as `ffn_*_shexp` with its sigmoid gate `ffn_gate_inp_shexp` (a
vector of `hidden` values; Hugging Face stores it as one row). The stacked tensors become one
Hugging Face tensor per expert (their names carry the `EXPERT` placeholder until split). Older
Mixtral files store each expert on its own (`ffn_gate.E.weight`); both load.
"""

from __future__ import annotations

import re
from typing import Any

from sglr.errors import GGUFFormatError, GGUFUnsupportedError

EXPERT = "{expert}"
MOE_ARCHITECTURES = ("llama", "qwen2moe", "qwen3moe")

_MIXTRAL_NAMES = {
    "ffn_gate_inp.weight": "block_sparse_moe.gate.weight",
    "ffn_gate_exps.weight": f"block_sparse_moe.experts.{EXPERT}.w1.weight",
    "ffn_down_exps.weight": f"block_sparse_moe.experts.{EXPERT}.w2.weight",
    "ffn_up_exps.weight": f"block_sparse_moe.experts.{EXPERT}.w3.weight",
}
_MIXTRAL_LEGACY_RE = re.compile(r"^ffn_(gate|down|up)\.(\d+)\.weight$")
_MIXTRAL_LEGACY = {"gate": "w1", "down": "w2", "up": "w3"}
_QWEN_MOE_NAMES = {
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "ffn_gate_exps.weight": f"mlp.experts.{EXPERT}.gate_proj.weight",
    "ffn_up_exps.weight": f"mlp.experts.{EXPERT}.up_proj.weight",
    "ffn_down_exps.weight": f"mlp.experts.{EXPERT}.down_proj.weight",
}
_QWEN2_SHARED_NAMES = {
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
}
# llama.cpp's routing when a file does not say (`expert_weights_norm`): Qwen2-MoE keeps the
# softmax weights of the top k, Qwen3-MoE renormalizes them (Mixtral always does).
_DEFAULT_NORM_TOPK = {"qwen2moe": False, "qwen3moe": True}


def moe_layer_name(architecture: str, suffix: str) -> str | None:
    """The Hugging Face layer suffix of a GGUF MoE tensor (with `EXPERT` for stacked experts), or
    None when `suffix` is not one."""
    if architecture == "llama":
        if suffix in _MIXTRAL_NAMES:
            return _MIXTRAL_NAMES[suffix]
        legacy = _MIXTRAL_LEGACY_RE.match(suffix)
        if legacy is not None:
            return f"block_sparse_moe.experts.{legacy.group(2)}.{_MIXTRAL_LEGACY[legacy.group(1)]}.weight"
        return None
    if architecture in ("qwen2moe", "qwen3moe"):
        names = {**_QWEN_MOE_NAMES, **(_QWEN2_SHARED_NAMES if architecture == "qwen2moe" else {})}
        return names.get(suffix)
    return None


def is_sparse_layer(tensor_names: frozenset[str], layer: int) -> bool:
    """Whether the layer has a router or experts (then it must have both)."""
    return any(
        f"blk.{layer}.{suffix}" in tensor_names
        for suffix in ("ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_gate.0.weight")
    )


def moe_config_fields(architecture: str, checkpoint: Any, num_layers: int) -> dict[str, Any]:
    """`config.json` fields of a MoE file (empty for a dense one)."""
    num_experts = int(checkpoint.arch_get("expert_count", 0) or 0)
    if num_experts == 0:
        if architecture in ("qwen2moe", "qwen3moe"):
            raise GGUFFormatError(f"{checkpoint.path}: {architecture} file without expert_count")
        return {}
    names = checkpoint.tensor_names()
    sparse = [is_sparse_layer(names, i) for i in range(num_layers)]
    if not any(sparse):
        raise GGUFFormatError(
            f"{checkpoint.path}: expert_count is {num_experts} but no layer has expert tensors"
        )
    top_k = int(checkpoint.arch_require("expert_used_count"))
    if architecture == "llama":
        if not all(sparse):
            raise GGUFUnsupportedError(
                f"{checkpoint.path}: a Mixtral (llama) file with dense layers among its MoE ones"
            )
        return {"num_local_experts": num_experts, "num_experts_per_tok": top_k, "sliding_window": None}
    expert_size = checkpoint.arch_get("expert_feed_forward_length")
    if expert_size is None:
        raise GGUFFormatError(f"{checkpoint.path}: {architecture} file without expert_feed_forward_length")
    norm = checkpoint.arch_get("expert_weights_norm", _DEFAULT_NORM_TOPK[architecture])
    fields: dict[str, Any] = {
        "num_experts": num_experts,
        "num_experts_per_tok": top_k,
        "moe_intermediate_size": int(expert_size),
        "norm_topk_prob": bool(norm),
        "decoder_sparse_step": 1,
        "mlp_only_layers": [i for i in range(num_layers) if not sparse[i]],
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": num_layers,
    }
    if architecture == "qwen2moe":
        shared = checkpoint.arch_get("expert_shared_feed_forward_length")
        has_shared = any(name.endswith("ffn_gate_shexp.weight") for name in names)
        fields["shared_expert_intermediate_size"] = int(shared) if shared is not None and has_shared else 0
        fields["qkv_bias"] = True
    else:
        fields["attention_bias"] = False
    return fields


def stored_moe_shape(hf_name: str, config: dict[str, Any]) -> tuple[int, ...] | None:
    """The shape a MoE tensor has in the file (stacked experts: `[experts, rows, cols]`; the
    shared expert's gate: `[hidden]`), or None for any other tensor."""
    hidden = config["hidden_size"]
    num_experts = config.get("num_local_experts", config.get("num_experts"))
    if num_experts is None:
        return None
    expert_size = config.get("moe_intermediate_size", config["intermediate_size"])
    shared_size = config.get("shared_expert_intermediate_size", 0)
    if hf_name.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight")):
        return (num_experts, hidden)
    if hf_name.endswith("shared_expert_gate.weight"):
        return (hidden,)
    if ".shared_expert." in hf_name:
        return (hidden, shared_size) if hf_name.endswith("down_proj.weight") else (shared_size, hidden)
    if ".experts." not in hf_name:
        return None
    shape = (
        (hidden, expert_size)
        if hf_name.endswith(("w2.weight", "down_proj.weight"))
        else (expert_size, hidden)
    )
    return (num_experts, *shape) if EXPERT in hf_name else shape
