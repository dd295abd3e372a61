"""`ModelConfig`: the architecture facts sglr needs, read from a Hugging Face `config.json`.

Both config dialects are accepted: the classic one (`rope_theta` + `rope_scaling`, `torch_dtype`)
and the newer `rope_parameters` / `dtype` form, so checkpoints written by any `transformers`
version (or by our own converters) load the same way. What a family reads beyond the Llama
fields (windows, soft-caps, biases, experts) its declaration says (`sglr.model.families`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sglr.errors import ModelConfigError
from sglr.model.family import Family
from sglr.model.family_options import FamilyOptions, read_family_options
from sglr.model.moe_config import MoEConfig
from sglr.model.registry import architecture_of_model_type, family_of, find_family
from sglr.model.vision_config import VisionConfig, read_vision_config

_ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling. `rope_type` is one of "default", "linear", "llama3"."""

    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int | None = None

    def __post_init__(self) -> None:
        if self.rope_type not in _ROPE_TYPES:
            raise ModelConfigError(
                f"unsupported rope scaling type {self.rope_type!r}; sglr supports {_ROPE_TYPES}"
            )
        if self.factor <= 0:
            raise ModelConfigError(f"rope scaling factor must be > 0, got {self.factor}")
        if self.rope_type == "llama3":
            if self.original_max_position_embeddings is None:
                raise ModelConfigError("llama3 rope scaling needs original_max_position_embeddings")
            if self.high_freq_factor <= self.low_freq_factor:
                raise ModelConfigError("llama3 rope scaling needs high_freq_factor > low_freq_factor")


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only transformer shape. Build with `ModelConfig.from_dict` or `load_model_config`."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    torch_dtype: str = "float32"
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    family: FamilyOptions = field(default_factory=FamilyOptions)
    moe: MoEConfig | None = None  # experts of a mixture-of-experts architecture
    vision: VisionConfig | None = None  # the image tower of a LLaVA-style architecture

    def __post_init__(self) -> None:
        family = family_of(self.architecture)
        if (self.moe is not None) != (family.experts is not None):
            raise ModelConfigError(f"{self.architecture} needs experts exactly when it is a MoE architecture")
        if (self.vision is not None) != (family.vision is not None):
            raise ModelConfigError(f"{self.architecture} needs a vision config exactly when it takes images")
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise ModelConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim % 2:
            raise ModelConfigError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.rms_norm_eps <= 0 or self.rope_theta <= 0:
            raise ModelConfigError("rms_norm_eps and rope_theta must be > 0")

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def num_params(self) -> int:
        """Parameter count (embeddings and lm_head counted once each unless tied)."""
        h = self.hidden_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        if self.attention_bias:
            attn += self.q_size + 2 * self.kv_size
        per_layer = attn + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        mlps = sum(self._mlp_params(layer_id) for layer_id in range(self.num_hidden_layers))
        return self.num_hidden_layers * per_layer + mlps + embed + h

    def _mlp_params(self, layer_id: int) -> int:
        h = self.hidden_size
        moe = self.moe
        if moe is None or not moe.is_sparse_layer(layer_id):
            return 3 * h * self.intermediate_size
        shared = moe.shared_expert_intermediate_size
        # router + routed experts (+ shared expert and its one-output gate)
        return (
            h * moe.num_experts
            + 3 * h * moe.expert_intermediate_size * moe.num_experts
            + (3 * h * shared + h if shared else 0)
        )

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        """Reads a `config.json` dict (either `transformers` dialect)."""
        architectures = raw.get("architectures") or []
        if not architectures:
            by_type = architecture_of_model_type(raw.get("model_type"))
            if by_type is None:
                raise ModelConfigError("config.json names no architecture (no 'architectures' field)")
            architectures = [by_type]
        architecture = architectures[0]
        multimodal = find_family(architecture)
        if multimodal is not None and multimodal.vision is not None:
            return _read_llava(raw, architecture, multimodal.vision.text_architectures)
        try:
            hidden_size = int(raw["hidden_size"])
            num_heads = int(raw["num_attention_heads"])
            vocab_size = int(raw["vocab_size"])
            intermediate_size = int(raw["intermediate_size"])
            num_layers = int(raw["num_hidden_layers"])
        except KeyError as exc:
            raise ModelConfigError(f"config.json lacks required field {exc.args[0]!r}") from None
        family = family_of(architecture)  # before reading family-specific fields
        head_dim = raw.get("head_dim") or hidden_size // num_heads
        rope_theta, rope_scaling = _read_rope(raw)
        eos = raw.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        return cls(
            architecture=architecture,
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or num_heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=family.config.attention_bias(raw),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            torch_dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float32"),
            bos_token_id=raw.get("bos_token_id"),
            eos_token_ids=eos_ids,
            family=read_family_options(raw, family.config, num_layers),
            moe=_read_experts(raw, architecture, family),
        )


def read_moe_config(raw: dict[str, Any], architecture: str) -> MoEConfig | None:
    """The mixture-of-experts part of a `config.json` dict; None for a dense architecture."""
    return _read_experts(raw, architecture, family_of(architecture))


def _read_experts(raw: dict[str, Any], architecture: str, family: Family) -> MoEConfig | None:
    if family.experts is None:
        return None
    try:
        return family.experts(raw)
    except KeyError as exc:
        raise ModelConfigError(f"{architecture} config.json lacks required field {exc.args[0]!r}") from None


def _read_llava(raw: dict[str, Any], architecture: str, text_architectures: tuple[str, ...]) -> ModelConfig:
    """A LLaVA config: the decoder from `text_config`, the tower and projector beside it."""
    text = dict(raw.get("text_config") or {})
    text_model_type = text.get("model_type", "llama")
    text_architecture = (text.get("architectures") or [None])[0] or architecture_of_model_type(
        text_model_type
    )
    if text_architecture not in text_architectures:
        raise ModelConfigError(
            f"unsupported LLaVA text model {text_model_type!r}; sglr supports {text_architectures}"
        )
    text["architectures"] = [text_architecture]
    text.setdefault("torch_dtype", raw.get("torch_dtype") or raw.get("dtype"))
    decoder = ModelConfig.from_dict(text)
    return replace(decoder, architecture=architecture, vision=read_vision_config(raw))


def _read_rope(raw: dict[str, Any]) -> tuple[float, RopeScaling]:
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):
        params = params["full_attention"]  # split per layer type (Gemma 3): the global layers'
    if isinstance(params, dict) and "rope_theta" in params:
        theta = float(params["rope_theta"])
        scaling = params
    else:
        theta = float(raw.get("rope_theta", 10000.0))
        scaling = raw.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type") or scaling.get("type") or "default"
    original = scaling.get("original_max_position_embeddings")
    if rope_type == "llama3" and original is None:
        original = raw.get("max_position_embeddings")
    return theta, RopeScaling(
        rope_type=rope_type,
        factor=float(scaling.get("factor", 1.0)),
        low_freq_factor=float(scaling.get("low_freq_factor", 1.0)),
        high_freq_factor=float(scaling.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=None if original is None else int(original),
    )


def load_model_config(model_dir: str | Path) -> ModelConfig:
    """Reads `<model_dir>/config.json`."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ModelConfigError(f"no config.json in {model_dir}")
    with path.open() as f:
        return ModelConfig.from_dict(json.load(f))
