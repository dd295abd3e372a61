"""`FamilyOptions`: what a model family adds to the Llama shape, read from `config.json` by the
rules its declaration gives (`ConfigRules`, in its module under `sglr.model.families`).

Mistral, Qwen2 (optionally), Phi-3 and Gemma slide an attention window over some or all layers;
Gemma also scales attention by `query_pre_attn_scalar`, soft-caps attention and final logits,
uses a GeLU-tanh MLP and (Gemma 3) a separate RoPE base for its local layers. Each option's
default is the Llama behaviour, so a Llama config yields `FamilyOptions()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sglr.errors import ModelConfigError
from sglr.kernels.attention_variant import AttentionVariant

ACTIVATIONS = ("silu", "gelu_pytorch_tanh")
_LAYER_TYPES = ("full_attention", "sliding_attention")
RawConfig = Mapping[str, Any]


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


def every_layer(raw: RawConfig, num_layers: int) -> list[bool]:
    """Which layers a config's `sliding_window` covers: all of them (Mistral, Phi-3, Mixtral)."""
    return [True] * num_layers


def attention_bias_key(raw: RawConfig) -> bool:
    """q/k/v (and o) biases exactly when `attention_bias` says so."""
    return bool(raw.get("attention_bias", False))


@dataclass(frozen=True)
class ConfigRules:
    """How a family reads its options from `config.json`; the defaults are Llama's."""

    attention_bias: Callable[[RawConfig], bool] = attention_bias_key
    # Which layers slide the config's `sliding_window` when it names no `layer_types`.
    sliding_layers: Callable[[RawConfig, int], list[bool]] = every_layer
    # A key that must be true for `sliding_window` to count (the Qwen families keep a window
    # size in their configs even when it is off).
    window_switch: str | None = None
    # The family scales attention by `query_pre_attn_scalar ** -0.5`, this when the key is absent.
    query_pre_attn_scalar: float | None = None
    # The attention and final logit soft-caps when the config leaves them out.
    default_softcaps: tuple[float | None, float | None] = (None, None)
    # The sliding-window layers have a RoPE base of their own (Gemma 3).
    local_rope_theta: bool = False


def read_family_options(raw: RawConfig, rules: ConfigRules, num_layers: int) -> FamilyOptions:
    """A family's options from a `config.json` dict, read by its `rules`."""
    if float(raw.get("partial_rotary_factor") or _rope_dict(raw).get("partial_rotary_factor") or 1.0) != 1.0:
        raise ModelConfigError("partial rotary embeddings (partial_rotary_factor < 1) are not supported")
    attn_cap, final_cap = rules.default_softcaps
    scalar = rules.query_pre_attn_scalar
    return FamilyOptions(
        layer_windows=_layer_windows(raw, rules, num_layers),
        query_pre_attn_scalar=None
        if scalar is None
        else _optional_float(raw.get("query_pre_attn_scalar", scalar)),
        attn_logit_softcap=_optional_float(raw.get("attn_logit_softcapping", attn_cap)),
        final_logit_softcap=_optional_float(raw.get("final_logit_softcapping", final_cap)),
        hidden_act=str(raw.get("hidden_activation") or raw.get("hidden_act") or "silu"),
        rope_local_theta=_local_rope_theta(raw) if rules.local_rope_theta else None,
    )


def _layer_windows(raw: RawConfig, rules: ConfigRules, num_layers: int) -> tuple[int | None, ...]:
    window = raw.get("sliding_window")
    if rules.window_switch is not None and not raw.get(rules.window_switch):
        window = None
    if window is None:
        return ()
    window = int(window)
    layer_types = raw.get("layer_types")
    if layer_types is not None:
        if len(layer_types) != num_layers or any(t not in _LAYER_TYPES for t in layer_types):
            raise ModelConfigError(f"layer_types must list {num_layers} of {_LAYER_TYPES}, got {layer_types}")
        sliding = [t == "sliding_attention" for t in layer_types]
    else:
        sliding = rules.sliding_layers(raw, num_layers)
    windows = tuple(window if s else None for s in sliding)
    return windows if any(w is not None for w in windows) else ()


def _local_rope_theta(raw: RawConfig) -> float:
    local = _rope_dict(raw, "sliding_attention")
    return float(local.get("rope_theta") or raw.get("rope_local_base_freq") or 10_000.0)


def _rope_dict(raw: RawConfig, layer_type: str = "full_attention") -> Mapping[str, Any]:
    """`rope_parameters` (newer configs), per layer type where the config splits it that way."""
    params = raw.get("rope_parameters")
    if not isinstance(params, dict):
        return {}
    nested = params.get(layer_type)
    return nested if isinstance(nested, dict) else params


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
