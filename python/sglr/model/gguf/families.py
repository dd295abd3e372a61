"""What the `gemma2`, `gemma3`, `phi3` and `qwen3` GGUF architectures add to the Llama/Qwen2
conversion (mixture-of-experts files: `moe.py`).

- tensor names: Gemma's "sandwich" norms (`post_attention_norm`, `post_ffw_norm`, and `ffn_norm`
  as the *pre*-feed-forward norm), Gemma 3's and Qwen3's per-head `attn_q_norm` / `attn_k_norm`, Phi-3's
  fused `attn_qkv` and `ffn_up` (gate and up rows stacked, as in Hugging Face's `gate_up_proj`);
- norm weights: llama.cpp's converter stores Gemma's `1 + w` norms as `1 + w` (its RMSNorm
  multiplies by the weight), so we subtract the 1 back;
- config: windows, soft-caps and the attention scale as llama.cpp reads them. llama.cpp stores
  no `query_pre_attn_scalar`: it scales by `head_dim ** -0.5`, except for the 27B Gemma models
  (`hidden / heads`), and so do we. Gemma 3's local RoPE base is fixed at 10000 in llama.cpp.

Mistral GGUF files use the `llama` architecture and carry no sliding window: they convert (and
run in llama.cpp) as plain Llama models. Phi-3 LongRoPE files (`rope_factors_long/short`) are
refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sglr.errors import GGUFUnsupportedError

_GEMMA_LAYER_NAMES = {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}
_QK_NORM_NAMES = {
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}
# GGUF layer suffix -> Hugging Face layer suffix, overriding the Llama table per architecture.
LAYER_NAME_OVERRIDES: dict[str, dict[str, str]] = {
    "gemma2": _GEMMA_LAYER_NAMES,
    "gemma3": {
        **_GEMMA_LAYER_NAMES,
        "attn_q_norm.weight": "self_attn.q_norm.weight",
        "attn_k_norm.weight": "self_attn.k_norm.weight",
    },
    "phi3": {"attn_qkv.weight": "self_attn.qkv_proj.weight", "ffn_up.weight": "mlp.gate_up_proj.weight"},
    "qwen3": _QK_NORM_NAMES,
    "qwen3moe": _QK_NORM_NAMES,
}
_LLAMA_REQUIRED = (
    "attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
    "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
)  # fmt: skip
_GEMMA2_REQUIRED = (*_LLAMA_REQUIRED, "post_attention_norm.weight", "post_ffw_norm.weight")
REQUIRED_LAYER_SUFFIXES: dict[str, tuple[str, ...]] = {
    "gemma2": _GEMMA2_REQUIRED,
    "gemma3": (*_GEMMA2_REQUIRED, "attn_q_norm.weight", "attn_k_norm.weight"),
    "phi3": ("attn_norm.weight", "ffn_norm.weight", "attn_qkv.weight", "attn_output.weight",
             "ffn_up.weight", "ffn_down.weight"),
    "qwen3": (*_LLAMA_REQUIRED, "attn_q_norm.weight", "attn_k_norm.weight"),
    "qwen3moe": (*_LLAMA_REQUIRED, "attn_q_norm.weight", "attn_k_norm.weight"),
}  # fmt: skip
# A MoE layer's tensors besides attention (which is the family's own): its norm and router.
MOE_LAYER_REQUIRED = ("attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight",
                      "attn_v.weight", "attn_output.weight", "ffn_gate_inp.weight")  # fmt: skip
_GEMMA_27B_SHAPE = (46, 4608)  # (layers, hidden): the models llama.cpp scales by hidden / heads
_GEMMA3_LOCAL_ROPE_THETA = 10_000.0
_GEMMA3_SLIDING_PATTERN = 6


def hf_shape_override(hf_name: str, config: dict[str, Any]) -> tuple[int, ...] | None:
    """Shapes of the tensors only these families have (None for the Llama ones)."""
    if hf_name.endswith(("q_norm.weight", "k_norm.weight")):
        return (config["head_dim"],)
    if hf_name.endswith("qkv_proj.weight"):
        q_len = config["num_attention_heads"] * config["head_dim"]
        kv_len = config["num_key_value_heads"] * config["head_dim"]
        return (q_len + 2 * kv_len, config["hidden_size"])
    if hf_name.endswith("gate_up_proj.weight"):
        return (2 * config["intermediate_size"], config["hidden_size"])
    return None


def restore_values(architecture: str, hf_name: str, values: np.ndarray) -> np.ndarray:
    """Undoes llama.cpp's `+ 1` on Gemma norm weights."""
    if architecture in ("gemma2", "gemma3") and hf_name.endswith("norm.weight"):
        return values - np.float32(1.0)
    return values


def family_config_fields(
    architecture: str, checkpoint: Any, num_layers: int, hidden_size: int, num_heads: int, head_dim: int
) -> dict[str, Any]:
    """`config.json` fields beyond the Llama ones, from the GGUF metadata."""
    if architecture == "qwen3":
        return {
            "attention_bias": False,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": num_layers,
        }
    if architecture == "phi3":
        if any(name.startswith("rope_factors_") for name in checkpoint.tensor_names()):
            raise GGUFUnsupportedError(f"{checkpoint.path}: Phi-3 LongRoPE scaling is not supported")
        window = checkpoint.arch_get("attention.sliding_window")
        return {"hidden_act": "silu", "sliding_window": None if window is None else int(window)}
    if architecture not in ("gemma2", "gemma3"):
        return {}
    is_27b = (num_layers, hidden_size) == _GEMMA_27B_SHAPE
    fields: dict[str, Any] = {
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": hidden_size // num_heads if is_27b else head_dim,
        "sliding_window": int(checkpoint.arch_require("attention.sliding_window")),
        "attn_logit_softcapping": _optional_float(checkpoint.arch_get("attn_logit_softcapping")),
        "final_logit_softcapping": _optional_float(checkpoint.arch_get("final_logit_softcapping")),
        "attention_bias": False,
    }
    if architecture == "gemma3":
        pattern = checkpoint.arch_get("attention.sliding_window_pattern", _GEMMA3_SLIDING_PATTERN)
        if isinstance(pattern, (list, tuple)):  # newer files: one flag per layer, True = local
            sliding = [bool(flag) for flag in pattern]
        else:
            sliding = [(i + 1) % int(pattern) != 0 for i in range(num_layers)]
        fields["layer_types"] = ["sliding_attention" if s else "full_attention" for s in sliding]
        fields["rope_local_base_freq"] = _GEMMA3_LOCAL_ROPE_THETA
    return fields


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
