"""Gemma 3 text decoder (`Gemma3ForCausalLM`, model_type "gemma3_text"): Gemma 2 plus RMSNorm
on each query and key head, a separate RoPE base for local layers (`rope_local_base_freq`, or
the "sliding_attention" entry of `rope_parameters`), five local layers per global one by default
(`layer_types` or `sliding_window_pattern`), and no soft-capping unless the config asks for it.

GGUF (`gemma3`): Gemma 2's tensors plus `attn_q_norm` / `attn_k_norm`; the local layers'
pattern as a number or (newer files) one flag per layer; the local RoPE base is fixed at 10000
in llama.cpp.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sglr.model.families.gemma2 import GEMMA2_REQUIRED, GEMMA_DECODER, GEMMA_LAYER_NAMES, gemma_gguf_fields
from sglr.model.families.qwen3 import QK_NORM_NAMES
from sglr.model.family import Family, GgufLayout, GgufShape
from sglr.model.family_options import ConfigRules, RawConfig

_SLIDING_PATTERN = 6
_LOCAL_ROPE_THETA = 10_000.0


def _every_nth_global(pattern: int, num_layers: int) -> list[bool]:
    """Local (True) layers, every `pattern`-th one global."""
    return [(i + 1) % pattern != 0 for i in range(num_layers)]


def _pattern(raw: RawConfig, num_layers: int) -> list[bool]:
    return _every_nth_global(int(raw.get("sliding_window_pattern", _SLIDING_PATTERN)), num_layers)


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    fields = gemma_gguf_fields(checkpoint, shape)
    pattern = checkpoint.arch_get("attention.sliding_window_pattern", _SLIDING_PATTERN)
    if isinstance(pattern, (list, tuple)):  # newer files: one flag per layer, True = local
        sliding = [bool(flag) for flag in pattern]
    else:
        sliding = _every_nth_global(int(pattern), shape.num_layers)
    fields["layer_types"] = ["sliding_attention" if s else "full_attention" for s in sliding]
    fields["rope_local_base_freq"] = _LOCAL_ROPE_THETA
    return fields


FAMILY = Family(
    architectures={"Gemma3ForCausalLM": "gemma3_text"},
    config=ConfigRules(sliding_layers=_pattern, query_pre_attn_scalar=256, local_rope_theta=True),
    decoder=dataclasses.replace(GEMMA_DECODER, qk_norm=True),
    gguf=GgufLayout(
        "gemma3",
        layer_names={**GEMMA_LAYER_NAMES, **QK_NORM_NAMES},
        required=(*GEMMA2_REQUIRED, *QK_NORM_NAMES),
        norm_offset=True,
        config_fields=_gguf_fields,
    ),
)
