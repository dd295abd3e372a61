"""Qwen2: the Llama block with biases on the q/k/v projections (always: the config's
`attention_bias` is not read) and an optional sliding window (`use_sliding_window`, on the
layers from `max_window_layers` on). The Qwen families after it share these rules."""

from __future__ import annotations

import dataclasses
from typing import Any

from sglr.errors import GGUFFormatError, GGUFUnsupportedError
from sglr.model.family import DecoderOptions, Family, GgufLayout, GgufShape
from sglr.model.family_options import ConfigRules, RawConfig


def windows_from_max_window_layers(raw: RawConfig, num_layers: int) -> list[bool]:
    """The window covers the layers from `max_window_layers` on."""
    first = int(raw.get("max_window_layers", num_layers))
    return [i >= first for i in range(num_layers)]


# The Qwen families keep a window size in their configs even when `use_sliding_window` is off.
QWEN_RULES = ConfigRules(sliding_layers=windows_from_max_window_layers, window_switch="use_sliding_window")


def _always_biased(raw: RawConfig) -> bool:
    return True


def no_window_fields(num_layers: int) -> dict[str, Any]:
    """A Qwen GGUF file has no sliding window (llama.cpp runs none)."""
    return {"use_sliding_window": False, "sliding_window": None, "max_window_layers": num_layers}


def require_qwen2_biases(checkpoint: Any, num_layers: int) -> None:
    names = checkpoint.tensor_names()
    for i in range(num_layers):
        for suffix in ("attn_q.bias", "attn_k.bias", "attn_v.bias"):
            if f"blk.{i}.{suffix}" not in names:
                raise GGUFFormatError(f"{checkpoint.path}: qwen2 GGUF file has no tensor 'blk.{i}.{suffix}'")
        if f"blk.{i}.attn_output.bias" in names:
            raise GGUFUnsupportedError(f"{checkpoint.path}: qwen2 model with an output projection bias")


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    require_qwen2_biases(checkpoint, shape.num_layers)
    return no_window_fields(shape.num_layers)


FAMILY = Family(
    architectures={"Qwen2ForCausalLM": "qwen2"},
    config=dataclasses.replace(QWEN_RULES, attention_bias=_always_biased),
    decoder=DecoderOptions(needs_attention_bias=True),
    gguf=GgufLayout("qwen2", config_fields=_gguf_fields),
)
