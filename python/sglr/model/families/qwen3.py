"""Qwen3: the Llama block with an RMSNorm over each query and key head before RoPE.

`head_dim` is its own config field (Qwen3 models often have `heads * head_dim != hidden`), and
q/k/v biases exist only when `attention_bias` says so. Its GGUF files (`qwen3`) carry the norms
as `attn_q_norm` / `attn_k_norm`. The fused CPU decode step does not run it (no per-head q/k
norms in rust/decode): decode steps take the layered path.
"""

from __future__ import annotations

from typing import Any

from sglr.model.families.qwen2 import QWEN_RULES, no_window_fields
from sglr.model.family import GGUF_LLAMA_REQUIRED, DecoderOptions, Family, GgufLayout, GgufShape

QK_NORM_NAMES = {
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    return {"attention_bias": False, **no_window_fields(shape.num_layers)}


FAMILY = Family(
    architectures={"Qwen3ForCausalLM": "qwen3"},
    config=QWEN_RULES,
    decoder=DecoderOptions(qk_norm=True, prepack_on_cpu=True),
    gguf=GgufLayout(
        "qwen3",
        layer_names=QK_NORM_NAMES,
        required=(*GGUF_LLAMA_REQUIRED, *QK_NORM_NAMES),
        config_fields=_gguf_fields,
    ),
)
