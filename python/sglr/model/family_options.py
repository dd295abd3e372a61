"""`FamilyOptions`: what a model family adds to the Llama shape, read from `config.json`.

Mistral, Qwen2 (optionally), Phi-3 and Gemma slide an attention window over some or all layers;
Gemma also scales attention by `query_pre_attn_scalar`, soft-caps attention and final logits,
uses a GeLU-tanh MLP and (Gemma 3) a separate RoPE base for its local layers. Each option's
default is the Llama behaviour, so a Llama config yields `FamilyOptions()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import ModelConfigError
from sglr.kernels.attention_variant import AttentionVariant

ACTIVATIONS = ("silu", "gelu_pytorch_tanh")
_LAYER_TYPES = ("full_attention", "sliding_attention")
# transformers' class defaults, for configs that leave the key out.
_DEFAULT_SOFTCAPS = {"Gemma2ForCausalLM": (50.0, 30.0)}
_GEMMA = ("Gemma2ForCausalLM", "Gemma3ForCausalLM")
_GEMMA3_SLIDING_PATTERN = 6


@dataclass(frozen=True)
class FamilyOptions:
    layer_windows: tuple[int | None, ...] = ()  # per layer: sliding window, None = global; () = none
    query_pre_attn_scalar: float | None = None  # attention scale = this ** -0.5 (else head_dim)
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    hidden_act: str = "silu"
    rope_local_theta: float | None = None  # RoPE base of the sliding-window layers (Gemma 3)

    def __post_init__(self) -> None:
        if self.hidden_act not in ACTIVATIONS:
            raise ModelConfigError(f"unsupported activation {self.hidden_act!r}; sglr supports {ACTIVATIONS}")
        for name in (
            "query_pre_attn_scalar",
            "attn_logit_softcap",
            "final_logit_softcap",
            "rope_local_theta",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ModelConfigError(f"{name} must be > 0, got {value}")

    def layer_window(self, layer_id: int) -> int | None:
        return self.layer_windows[layer_id] if self.layer_windows else None

    def attention_variant(self, layer_id: int, head_dim: int) -> AttentionVariant:
        scalar = self.query_pre_attn_scalar if self.query_pre_attn_scalar is not None else head_dim
        return AttentionVariant(scalar**-0.5, self.layer_window(layer_id), self.attn_logit_softcap)


def read_family_options(raw: dict[str, Any], architecture: str, num_layers: int) -> FamilyOptions:
    """The options of `architecture` from a `config.json` dict."""
    if float(raw.get("partial_rotary_factor") or _rope_dict(raw).get("partial_rotary_factor") or 1.0) != 1.0:
        raise ModelConfigError("partial rotary embeddings (partial_rotary_factor < 1) are not supported")
    attn_cap, final_cap = _DEFAULT_SOFTCAPS.get(architecture, (None, None))
    gemma = architecture in _GEMMA
    return FamilyOptions(
        layer_windows=_layer_windows(raw, architecture, num_layers),
        query_pre_attn_scalar=_optional_float(raw.get("query_pre_attn_scalar", 256)) if gemma else None,
        attn_logit_softcap=_optional_float(raw.get("attn_logit_softcapping", attn_cap)),
        final_logit_softcap=_optional_float(raw.get("final_logit_softcapping", final_cap)),
        hidden_act=str(raw.get("hidden_activation") or raw.get("hidden_act") or "silu"),
        rope_local_theta=_local_rope_theta(raw) if architecture == "Gemma3ForCausalLM" else None,
    )


_QWEN = ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")


def _layer_windows(raw: dict[str, Any], architecture: str, num_layers: int) -> tuple[int | None, ...]:
    window = raw.get("sliding_window")
    if architecture in _QWEN and not raw.get("use_sliding_window"):
        window = None  # the Qwen families keep a window size in their configs even when it is off
    if window is None:
        return ()
    window = int(window)
    layer_types = raw.get("layer_types")
    if layer_types is not None:
        if len(layer_types) != num_layers or any(t not in _LAYER_TYPES for t in layer_types):
            raise ModelConfigError(f"layer_types must list {num_layers} of {_LAYER_TYPES}, got {layer_types}")
        sliding = [t == "sliding_attention" for t in layer_types]
    elif architecture == "Gemma2ForCausalLM":
        sliding = [i % 2 == 0 for i in range(num_layers)]
    elif architecture == "Gemma3ForCausalLM":
        pattern = int(raw.get("sliding_window_pattern", _GEMMA3_SLIDING_PATTERN))
        sliding = [(i + 1) % pattern != 0 for i in range(num_layers)]
    elif architecture in _QWEN:
        first = int(raw.get("max_window_layers", num_layers))
        sliding = [i >= first for i in range(num_layers)]
    else:  # Mistral, Phi-3, Mixtral: every layer
        sliding = [True] * num_layers
    windows = tuple(window if s else None for s in sliding)
    return windows if any(w is not None for w in windows) else ()


def _local_rope_theta(raw: dict[str, Any]) -> float:
    local = _rope_dict(raw, "sliding_attention")
    return float(local.get("rope_theta") or raw.get("rope_local_base_freq") or 10_000.0)


def _rope_dict(raw: dict[str, Any], layer_type: str = "full_attention") -> dict[str, Any]:
    """`rope_parameters` (newer configs), per layer type where the config splits it that way."""
    params = raw.get("rope_parameters")
    if not isinstance(params, dict):
        return {}
    nested = params.get(layer_type)
    return nested if isinstance(nested, dict) else params


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
