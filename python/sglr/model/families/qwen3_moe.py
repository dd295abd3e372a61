"""Qwen3-MoE: Qwen3 attention (per-head q/k norms, no biases by default) and MoE blocks without a
shared expert; `norm_topk_prob` says whether the top-k weights are renormalized, and
`decoder_sparse_step` / `mlp_only_layers` leave some layers dense. GGUF: `qwen3moe`, the Qwen
expert tensors beside Qwen3's."""

from __future__ import annotations

from typing import Any

from sglr.model.families.qwen2 import QWEN_RULES
from sglr.model.families.qwen2_moe import QWEN_EXPERT_NAMES, qwen_expert_fields, read_qwen_experts
from sglr.model.families.qwen3 import QK_NORM_NAMES
from sglr.model.family import GGUF_LLAMA_REQUIRED, DecoderOptions, Family, GgufLayout, GgufShape


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    # llama.cpp renormalizes Qwen3-MoE's top-k weights unless the file says otherwise.
    fields = qwen_expert_fields(checkpoint, shape.num_layers, renormalize=True)
    return {**fields, "attention_bias": False}


FAMILY = Family(
    architectures={"Qwen3MoeForCausalLM": "qwen3_moe"},
    config=QWEN_RULES,
    decoder=DecoderOptions(qk_norm=True, prepack_on_cpu=True),
    experts=lambda raw: read_qwen_experts(raw, shared_expert=False),
    gguf=GgufLayout(
        "qwen3moe",
        layer_names={**QK_NORM_NAMES, **QWEN_EXPERT_NAMES},
        required=(*GGUF_LLAMA_REQUIRED, *QK_NORM_NAMES),
        config_fields=_gguf_fields,
    ),
)
