"""Reads a LoRA adapter in the PEFT layout (`adapter_config.json` + `adapter_model.safetensors`,
or `adapter_model.bin`) and checks it against the base model before anything serves it.

Refused with `LoraAdapterError` naming what is wrong: another PEFT method, DoRA, LoRA biases,
`fan_in_fan_out` weights, `modules_to_save` (full copies of embeddings or the head), adapters of
embeddings or of any projection but q/k/v/o/gate/up/down (fused qkv / gate-up included), a
mixture-of-experts layer, a tensor PEFT does not write, a missing half of a pair, a rank over
`max_rank`, a projection outside `allowed_projections`, and shapes that do not fit the base.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from sglr.errors import LoraAdapterError
from sglr.model.config import ModelConfig
from sglr.model.lora.adapter import FUSED_LORA_PROJECTIONS, LORA_PROJECTIONS, LoraAdapter, LoraWeights

CONFIG_NAME = "adapter_config.json"
_WEIGHT_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
# `base_model.model.<module path>.lora_A.weight`, the module path ending in
# `layers.<N>.<block>.<projection>` (a multimodal model's language model nests it deeper).
_TENSOR = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<half>[AB])(?:\.default)?\.weight$")
_LAYER_PROJECTION = re.compile(r"(?:^|\.)layers\.(?P<layer>\d+)\.[A-Za-z_]+\.(?P<projection>\w+)$")
_UNSUPPORTED_OPTIONS = {
    "use_dora": "DoRA adapters",
    "fan_in_fan_out": "fan_in_fan_out (Conv1D) weights",
}


def load_peft_adapter(
    name: str,
    path: str | Path,
    config: ModelConfig,
    max_rank: int | None = None,
    allowed_projections: tuple[str, ...] | None = None,
) -> LoraAdapter:
    """The adapter in directory `path`, checked against `config` (the base model's)."""
    folder = Path(path)
    options = _read_config(folder)
    tensors = _read_tensors(folder)
    pairs: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    modules: dict[tuple[int, str], str] = {}
    embedding = next((key for key in tensors if "lora_embedding" in key), None)
    if embedding is not None:
        raise LoraAdapterError(f"{embedding}: embedding adapters are not supported")
    # LoRA pairs first: an adapter of the head also saves the head itself, and the pair's
    # module is what the error should name.
    for key in sorted(tensors, key=lambda k: _TENSOR.match(k) is None):
        tensor = tensors[key]
        module, layer, projection, half = _parse_key(key, config)
        pairs.setdefault((layer, projection), {})[half] = tensor
        modules[(layer, projection)] = module
    if not pairs:
        raise LoraAdapterError(f"adapter {name!r} at {folder}: no LoRA weights in it")
    weights: dict[tuple[int, str], LoraWeights] = {}
    for (layer, projection), halves in sorted(pairs.items()):
        where = f"adapter {name!r}: layers.{layer}.{projection}"
        if set(halves) != {"A", "B"}:
            missing = ({"A", "B"} - set(halves)).pop()
            raise LoraAdapterError(f"{where} has no lora_{missing} weight")
        lora_a, lora_b = halves["A"].float(), halves["B"].float()
        rank = _check_pair(where, lora_a, lora_b, max_rank)
        parts = FUSED_LORA_PROJECTIONS.get(projection, (projection,))
        if allowed_projections is not None:
            outside = [p for p in parts if p not in allowed_projections]
            if outside:
                raise LoraAdapterError(
                    f"{where}: the server adapts only {', '.join(allowed_projections)} "
                    f"(--lora-target-modules), not {', '.join(outside)}"
                )
        in_features, out_sizes = _base_shape(config, parts)
        if lora_a.shape[1] != in_features or lora_b.shape[0] != sum(out_sizes):
            raise LoraAdapterError(
                f"{where}: lora_A {tuple(lora_a.shape)} and lora_B {tuple(lora_b.shape)} do not fit "
                f"the base projection ({sum(out_sizes)} x {in_features})"
            )
        scaled_b = lora_b * _scaling(options, modules[(layer, projection)], rank)
        for part, rows in zip(parts, scaled_b.split(out_sizes), strict=True):
            if (layer, part) in weights:
                raise LoraAdapterError(f"{where}: {part} is adapted twice (fused and alone)")
            weights[(layer, part)] = LoraWeights(lora_a, rows.contiguous())
    return LoraAdapter(
        name=name,
        path=str(folder),
        rank=max(w.rank for w in weights.values()),
        projections=tuple(sorted({p for _, p in weights}, key=LORA_PROJECTIONS.index)),
        weights=weights,
    )


def _read_config(folder: Path) -> dict[str, Any]:
    config_path = folder / CONFIG_NAME
    if not config_path.is_file():
        raise LoraAdapterError(f"no {CONFIG_NAME} in {folder} (a PEFT LoRA adapter directory)")
    try:
        options = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise LoraAdapterError(f"{config_path}: not readable JSON: {exc}") from exc
    if not isinstance(options, dict):
        raise LoraAdapterError(f"{config_path}: not a JSON object")
    peft_type = str(options.get("peft_type", "LORA")).upper()
    if peft_type != "LORA":
        raise LoraAdapterError(f"{config_path}: peft_type {peft_type!r}; only LORA adapters are served")
    for option, what in _UNSUPPORTED_OPTIONS.items():
        if options.get(option):
            raise LoraAdapterError(f"{config_path}: {what} are not supported ({option}=true)")
    if options.get("bias", "none") != "none":
        raise LoraAdapterError(f"{config_path}: LoRA biases are not supported (bias={options['bias']!r})")
    if options.get("modules_to_save"):
        raise LoraAdapterError(
            f"{config_path}: modules_to_save {options['modules_to_save']} (full copies of base "
            "modules, such as embeddings or the head) are not supported"
        )
    return options


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    for weight_name in _WEIGHT_NAMES:
        weight_path = folder / weight_name
        if not weight_path.is_file():
            continue
        try:
            if weight_path.suffix == ".safetensors":
                from safetensors.torch import load_file

                return load_file(str(weight_path))
            return torch.load(weight_path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a truncated or foreign file: the caller's adapter is bad
            raise LoraAdapterError(f"{weight_path}: not readable: {exc}") from exc
    raise LoraAdapterError(f"no {' or '.join(_WEIGHT_NAMES)} in {folder}")


def _parse_key(key: str, config: ModelConfig) -> tuple[str, int, str, str]:
    """(module path, layer, projection, "A" | "B") of a tensor name; refuses anything else."""
    match = _TENSOR.match(key)
    if match is None:
        raise LoraAdapterError(f"{key}: not a LoRA weight sglr knows (lora_A / lora_B of a projection)")
    module, half = match["module"], match["half"]
    if "vision" in module or "multi_modal_projector" in module:  # a LLaVA's image side
        raise LoraAdapterError(f"{module}: adapters of the image tower or projector are not supported")
    found = _LAYER_PROJECTION.search(module)
    projection = module.rsplit(".", 1)[-1]
    if found is None or (projection not in LORA_PROJECTIONS and projection not in FUSED_LORA_PROJECTIONS):
        supported = ", ".join((*LORA_PROJECTIONS, *FUSED_LORA_PROJECTIONS))
        raise LoraAdapterError(f"{module}: adapters of this module are not supported (only {supported})")
    layer = int(found["layer"])
    if layer >= config.num_hidden_layers:
        raise LoraAdapterError(f"{module}: the base model has {config.num_hidden_layers} layers")
    is_mlp = projection in ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
    if is_mlp and config.moe is not None and config.moe.is_sparse_layer(layer):
        raise LoraAdapterError(f"{module}: adapters of mixture-of-experts blocks are not supported")
    return module, layer, projection, half


def _check_pair(where: str, lora_a: torch.Tensor, lora_b: torch.Tensor, max_rank: int | None) -> int:
    if lora_a.dim() != 2 or lora_b.dim() != 2 or lora_a.shape[0] != lora_b.shape[1]:
        raise LoraAdapterError(
            f"{where}: lora_A {tuple(lora_a.shape)} and lora_B {tuple(lora_b.shape)} are not a rank-r pair"
        )
    rank = int(lora_a.shape[0])
    if rank < 1:
        raise LoraAdapterError(f"{where}: rank 0")
    if max_rank is not None and rank > max_rank:
        raise LoraAdapterError(f"{where}: rank {rank} is over max_lora_rank {max_rank}")
    return rank


def _base_shape(config: ModelConfig, parts: tuple[str, ...]) -> tuple[int, list[int]]:
    """(in_features, out_features of each part) of the base projection(s), checkpoint shapes."""
    q_size = config.num_attention_heads * config.head_dim
    kv_size = config.num_key_value_heads * config.head_dim
    hidden, intermediate = config.hidden_size, config.intermediate_size
    shapes = {
        "q_proj": (hidden, q_size),
        "k_proj": (hidden, kv_size),
        "v_proj": (hidden, kv_size),
        "o_proj": (q_size, hidden),
        "gate_proj": (hidden, intermediate),
        "up_proj": (hidden, intermediate),
        "down_proj": (intermediate, hidden),
    }
    return shapes[parts[0]][0], [shapes[part][1] for part in parts]


def _scaling(options: dict[str, Any], module: str, rank: int) -> float:
    """`lora_alpha / r` (`/ sqrt(r)` with rsLoRA); an `alpha_pattern` key the module's path
    ends with (as a regular expression, as PEFT matches it) overrides `lora_alpha`."""
    alpha = float(options.get("lora_alpha", 8))
    for pattern, value in (options.get("alpha_pattern") or {}).items():
        if re.fullmatch(rf"(.*\.)?{pattern}", module):
            alpha = float(value)
    return alpha / (math.sqrt(rank) if options.get("use_rslora") else rank)
