"""Gemma 2 (and the base of Gemma 3). Differences from Llama:
- token embeddings are multiplied by sqrt(hidden_size), rounded to the model dtype first;
- RMSNorm weights are stored as offsets from 1 (`x_hat * (1 + w)`, computed in fp32);
- "sandwich" norms: each block's output is normalized again before joining the residual;
- a GeLU-tanh gated MLP (from the config), attention scaled by `query_pre_attn_scalar ** -0.5`,
  attention scores and final logits soft-capped, local (sliding-window) and global layers
  alternating, local first.

GGUF (`gemma2`): `post_attention_norm`, `post_ffw_norm`, and `ffn_norm` as the *pre*-feed-forward
norm; llama.cpp's converter stores the `1 + w` norms as `1 + w` (its RMSNorm multiplies by the
weight), so the 1 is subtracted back. llama.cpp stores no `query_pre_attn_scalar`: it scales by
`head_dim ** -0.5`, except for the 27B models (`hidden / heads`), and so do we.
"""

from __future__ import annotations

from typing import Any

from sglr.model.family import GGUF_LLAMA_REQUIRED, DecoderOptions, Family, GgufLayout, GgufShape
from sglr.model.family_options import ConfigRules, RawConfig

GEMMA_DECODER = DecoderOptions(
    norm="offset", sandwich_norms=True, scale_embeddings=True, final_logit_softcap=True
)
GEMMA_LAYER_NAMES = {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}
GEMMA2_REQUIRED = (*GGUF_LLAMA_REQUIRED, "post_attention_norm.weight", "post_ffw_norm.weight")
_GEMMA_27B_SHAPE = (46, 4608)  # (layers, hidden): the models llama.cpp scales by hidden / heads


def _alternating(raw: RawConfig, num_layers: int) -> list[bool]:
    return [i % 2 == 0 for i in range(num_layers)]


def gemma_gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    """Gemma's `config.json` fields as llama.cpp reads them from the file."""
    is_27b = (shape.num_layers, shape.hidden_size) == _GEMMA_27B_SHAPE
    return {
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": shape.hidden_size // shape.num_heads if is_27b else shape.head_dim,
        "sliding_window": int(checkpoint.arch_require("attention.sliding_window")),
        "attn_logit_softcapping": _optional_float(checkpoint.arch_get("attn_logit_softcapping")),
        "final_logit_softcapping": _optional_float(checkpoint.arch_get("final_logit_softcapping")),
        "attention_bias": False,
    }


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


FAMILY = Family(
    architectures={"Gemma2ForCausalLM": "gemma2"},
    # transformers' class defaults for the soft-caps, for configs that leave the keys out.
    config=ConfigRules(sliding_layers=_alternating, query_pre_attn_scalar=256, default_softcaps=(50.0, 30.0)),
    decoder=GEMMA_DECODER,
    gguf=GgufLayout(
        "gemma2",
        layer_names=GEMMA_LAYER_NAMES,
        required=GEMMA2_REQUIRED,
        norm_offset=True,
        config_fields=gemma_gguf_fields,
    ),
)
