"""Keeping a GGUF checkpoint's 4-bit matrices 4-bit in memory: every linear layer whose checkpoint
matrices (each shard of a fused one) are all Q4_0/Q4_1 gets a `sglr._core.Q4Matrix` built straight
from the file's blocks (`sglr.model.gguf.int4_blocks`) and drops its dense weight. An output head (or
tied embeddings) stored as Q8_0 stays 8-bit the same way (`sglr.kernels.cpu_q8`). Everything
else (other block formats, embeddings, norms, biases) loads dequantized as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType

from sglr.errors import GGUFFormatError
from sglr.kernels.cpu_q4 import q4_matrix, q4_supported
from sglr.kernels.cpu_q8 import Q8Weight
from sglr.model.gguf.int4_blocks import INT4_TYPE_NAMES, int4_groups
from sglr.model.gguf.names import hf_tensor_name
from sglr.model.gguf.q8_blocks import q8_0_levels_scales
from sglr.model.gguf.reader import GGUFTensor
from sglr.model.gguf.tensor_types import raw_tensor_bytes, read_tensor_table
from sglr.model.layers import FUSED_PROJECTIONS, Linear


def load_int4_linears(model: torch.nn.Module, gguf_path: Path) -> set[str]:
    """Moves each eligible `Linear` of `model` to 4-bit blocks; returns the checkpoint (Hugging Face)
    tensor names consumed, which the dense loader must then skip."""
    # The tensor table and raw bytes only: the metadata (vocabulary) was read at conversion.
    table = read_tensor_table(gguf_path)
    architecture = table.architecture
    if architecture is None:
        raise GGUFFormatError(f"{gguf_path}: no general.architecture in the GGUF metadata")
    raw = raw_tensor_bytes(gguf_path, table)
    by_name: dict[str, GGUFTensor] = {}
    for entry in table.entries:
        hf_name = hf_tensor_name(entry.name, architecture)
        if hf_name is not None:
            shape = tuple(int(dim) for dim in reversed(entry.dims))
            by_name[hf_name] = GGUFTensor(
                entry.name, GGMLQuantizationType(entry.ggml_type), shape, raw[entry.name]
            )
    config = model.config
    rope_heads = {"q_proj": config.num_attention_heads, "k_proj": config.num_key_value_heads}
    consumed: set[str] = set()
    for module_name, module in model.named_modules():
        if not isinstance(module, Linear) or module.reduce is not None or module.row_starts:
            continue
        names = _checkpoint_names(module_name, module)
        tensors = [by_name.get(name) for name in names]
        if any(t is None or t.type_name not in INT4_TYPE_NAMES for t in tensors):
            continue
        if not q4_supported(module.out_features, module.in_features):
            continue
        parts = []
        for name, tensor in zip(names, tensors, strict=True):
            projection = name.rsplit(".", 2)[-2]
            heads = rope_heads.get(projection) if architecture == "llama" else None
            parts.append(int4_groups(tensor, heads))
        levels, scales, zeros = (np.concatenate(column) for column in zip(*parts, strict=True))
        if levels.shape != (module.out_features, module.in_features):
            continue  # the dense loader reports the shape mismatch
        module.use_q4(q4_matrix(levels, scales, zeros))
        consumed.update(names)
    consumed.update(_load_q8_head(model, by_name))
    return consumed


def _load_q8_head(model: torch.nn.Module, by_name: dict[str, GGUFTensor]) -> set[str]:
    """The output head (or the tied embeddings) kept 8-bit when the file stores it as Q8_0;
    returns the checkpoint name it consumed (none otherwise)."""
    head = getattr(model, "lm_head", None)
    name = "lm_head.weight"
    if head is None:
        head, name = model.model.embed_tokens, "model.embed_tokens.weight"
    tensor = by_name.get(name)
    if tensor is None or tensor.type_name != "Q8_0" or head.tp is not None:
        return set()
    levels, scales = q8_0_levels_scales(tensor)
    if levels.shape != tuple(head.weight.shape):
        return set()
    head.use_q8(Q8Weight(levels, scales))
    return {name}


def without_names(
    weights: Iterable[tuple[str, torch.Tensor]], skipped: set[str]
) -> Iterator[tuple[str, torch.Tensor]]:
    return ((name, tensor) for name, tensor in weights if name not in skipped)


def _checkpoint_names(module_name: str, module: Linear) -> list[str]:
    """The checkpoint weights a linear layer is loaded from, in its row order."""
    if not module.shard_offsets:
        return [f"{module_name}.weight"]
    names = []
    for shard in module.shard_offsets:
        part = next(
            p for p, fused, s in FUSED_PROJECTIONS if s == shard and module_name.endswith(f".{fused}")
        )
        names.append(f"{module_name.rsplit('.', 1)[0]}.{part}.weight")
    return names
