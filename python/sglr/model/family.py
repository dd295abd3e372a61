"""How a model family declares itself: one `Family` per module of `sglr.model.families`, which
`sglr.model.registry` finds. A declaration says everything that sets the family apart from
Llama, so adding a family touches no table elsewhere:

- `architectures`: the `config.json` names it answers to;
- `config` (`ConfigRules`): the options it reads from `config.json` (windows, soft-caps, ...);
- `decoder` (`DecoderOptions`): how `sglr.model.decoder` builds and loads its layers;
- `experts`: its mixture-of-experts facts, read from `config.json` (a MoE family);
- `gguf` (`GgufLayout`): its llama.cpp files (architecture name, tensor names, metadata);
- `vision` (`VisionParts`): a multimodal family's own model class and text decoders.

Every default is Llama's. Nothing here (nor in a declaration) imports torch or numpy: the
registry reads the declarations to parse a `config.json`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sglr.errors import ModelConfigError
from sglr.model.family_options import ConfigRules, RawConfig
from sglr.model.moe_config import MoEConfig

NORM_KINDS = ("rms", "offset")
Named = tuple[str, Any]
# The placeholder for the expert index in the Hugging Face name of a stacked GGUF expert tensor.
GGUF_EXPERT = "{expert}"
# A GGUF layer's two norms and attention matrices, and every layer of a Llama file (biases come
# on top; a mixture-of-experts layer has a router and experts in place of the MLP).
GGUF_ATTENTION_REQUIRED = (
    "attn_norm.weight",
    "ffn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
)
GGUF_LLAMA_REQUIRED = (*GGUF_ATTENTION_REQUIRED, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")


@dataclass(frozen=True)
class DecoderOptions:
    """The layer builders' options (`sglr.model.decoder`); defaults: Llama's."""

    norm: str = "rms"  # "rms": w * x_hat; "offset": (1 + w) * x_hat in fp32 (Gemma)
    qk_norm: bool = False  # a norm (of `norm`'s kind) over each query and key head before RoPE
    sandwich_norms: bool = False  # attention and MLP outputs normalized before joining the residual
    scale_embeddings: bool = False  # token embeddings times sqrt(hidden_size), rounded to the dtype
    final_logit_softcap: bool = False  # logits soft-capped by the config's `final_logit_softcap`
    ffn_name: str = "mlp"  # the checkpoint's name of a layer's feed-forward module
    needs_attention_bias: bool = False  # refuse a config without q/k/v biases
    prepack_on_cpu: bool = False  # CPU linears and head multiply prepacked oneDNN weights
    # Checkpoint tensors -> the names and pieces the modules load (e.g. Phi-3's fused q/k/v split),
    # given the model's `ModelConfig`.
    checkpoint_renames: Callable[[Any, Iterable[Named]], Iterator[Named]] | None = None

    def __post_init__(self) -> None:
        if self.norm not in NORM_KINDS:
            raise ModelConfigError(f"norm must be one of {NORM_KINDS}, got {self.norm!r}")


@dataclass(frozen=True)
class GgufShape:
    """The attention geometry of a GGUF file, from its metadata (for `GgufLayout.config_fields`)."""

    num_layers: int
    hidden_size: int
    num_heads: int
    head_dim: int


def _no_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class GgufLayout:
    """A family's llama.cpp files (`sglr.model.gguf`); defaults: the Llama tensors as they are.

    `config_fields(checkpoint, shape)` returns the `config.json` fields beyond the Llama ones,
    from the file's metadata (`checkpoint`: a `sglr.model.gguf.reader.GGUFCheckpoint`), and
    raises for a file the family cannot run."""

    architecture: str  # `general.architecture`
    # GGUF layer suffix -> Hugging Face layer suffix, over the Llama table (MoE tensors too:
    # stacked experts carry `GGUF_EXPERT` in their name).
    layer_names: Mapping[str, str] = field(default_factory=dict)
    # GGUF layer suffixes for names that follow a pattern (older files' per-expert tensors).
    layer_name: Callable[[str], str | None] | None = None
    required: tuple[str, ...] = GGUF_LLAMA_REQUIRED  # the tensors of every dense layer
    rope_rows_permuted: bool = False  # llama.cpp reordered the q/k rows to rotate adjacent pairs
    norm_offset: bool = False  # norm weights stored as `1 + w` (Gemma's converter)
    config_fields: Callable[[Any, GgufShape], dict[str, Any]] = _no_fields


@dataclass(frozen=True)
class VisionParts:
    """A multimodal family: the decoders its `text_config` may name, and its own model class."""

    text_architectures: tuple[str, ...]
    # architecture -> the torch module class (imported when a model is built, not before).
    model_class: Callable[[str], type]


@dataclass(frozen=True)
class Family:
    # `config.json` "architectures" name -> its "model_type" (how a config without "architectures"
    # names it; None: by name only), the main one first.
    architectures: Mapping[str, str | None]
    config: ConfigRules = field(default_factory=ConfigRules)
    decoder: DecoderOptions = field(default_factory=DecoderOptions)
    # A mixture-of-experts family: its experts from `config.json` (a KeyError names a missing field).
    experts: Callable[[RawConfig], MoEConfig] | None = None
    gguf: GgufLayout | None = None
    vision: VisionParts | None = None

    @property
    def main_architecture(self) -> str:
        return next(iter(self.architectures))
