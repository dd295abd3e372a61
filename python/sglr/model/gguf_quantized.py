"""Keeping a GGUF checkpoint's quantized matrices quantized in memory: every linear layer whose
checkpoint matrices (each shard of a fused one) are all in a block format the CPU kernels run
(`QUANTIZED_TYPE_NAMES`: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) gets a
`sglr._core.GgufMatrix` built from the file's bytes as stored (rust/kernels keeps them; the parts
of a fused matrix may differ in format, as a Q4_K_M file's Q6_K values beside Q4_K queries, or
its Q5_0 / Q8_0 fallbacks for rows whose length is not a multiple of 256) and drops its dense
weight. The output head (or tied embeddings) stays quantized too: Q8_0 through
`sglr.kernels.cpu_q8` (exact f32 logits for a row or two), the other formats as a `GgufMatrix`
(lookups dequantize the rows asked for). Everything else (other block formats, norms, biases)
loads dequantized as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType

from sglr.errors import GGUFFormatError
from sglr.kernels.cpu_q8 import Q8Weight
from sglr.kernels.cpu_quantized import gguf_matrix
from sglr.model.gguf.names import hf_tensor_name, unpermute_rope_rows
from sglr.model.gguf.q8_blocks import q8_0_levels_scales
from sglr.model.gguf.reader import GGUFTensor
from sglr.model.gguf.tensor_types import raw_tensor_bytes, read_tensor_table
from sglr.model.layers import FUSED_PROJECTIONS, Linear
from sglr.model.registry import family_of

# Block formats kept as stored (rust/kernels' quant kernels multiply them as such).
QUANTIZED_TYPE_NAMES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K")
# Formats whose presence makes `gguf_weights="auto"` run quantized: 4 to 6 bits per weight, where
# reading fewer bytes per decode step pays (files of Q8_0 layers alone: `runs_quantized_by_default`).
LOW_BIT_TYPE_NAMES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")


def load_quantized_linears(model: torch.nn.Module, gguf_path: Path) -> set[str]:
    """Moves each eligible `Linear` of `model` to its quantized blocks; returns the checkpoint
    (Hugging Face) tensor names consumed, which the dense loader must then skip."""
    # The tensor table and raw bytes only: the metadata (vocabulary) was read at conversion.
    table = read_tensor_table(gguf_path)
    if table.architecture is None:
        raise GGUFFormatError(f"{gguf_path}: no general.architecture in the GGUF metadata")
    layout = family_of(model.config.architecture).gguf
    if layout is None:
        raise GGUFFormatError(f"{gguf_path}: {model.config.architecture} models have no GGUF layout")
    raw = raw_tensor_bytes(gguf_path, table)
    by_name: dict[str, GGUFTensor] = {}
    for entry in table.entries:
        hf_name = hf_tensor_name(entry.name, layout)
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
        if any(t is None or t.type_name not in QUANTIZED_TYPE_NAMES or len(t.shape) != 2 for t in tensors):
            continue
        if any(t.shape[1] != module.in_features for t in tensors):
            continue  # the dense loader reports the shape mismatch
        if sum(t.shape[0] for t in tensors) != module.out_features:
            continue
        parts = []
        for name, tensor in zip(names, tensors, strict=True):
            projection = name.rsplit(".", 2)[-2]
            heads = rope_heads.get(projection) if layout.rope_rows_permuted else None
            parts.append((tensor.type_name, _row_blocks(tensor, heads)))
        module.use_quantized(_matrix(gguf_path, names, parts, module.in_features))
        consumed.update(names)
    consumed.update(_load_quantized_head(model, by_name, gguf_path))
    return consumed


def _matrix(gguf_path: Path, names: list[str], parts: list[tuple[str, np.ndarray]], cols: int):
    """The parts as one `GgufMatrix`; damaged blocks (a non-finite scale, a wrong length) are a
    `GGUFFormatError` naming the tensors."""
    try:
        return gguf_matrix(parts, cols)
    except ValueError as exc:
        raise GGUFFormatError(f"{gguf_path}: {', '.join(names)}: {exc}") from exc


def _row_blocks(tensor: GGUFTensor, rope_heads: int | None) -> np.ndarray:
    """The tensor's bytes as `[rows, bytes_per_row]` (a view of the file unless llama's query /
    key rows must be put back in Hugging Face's order: a row's blocks move as a whole)."""
    rows = tensor.shape[0]
    blocks = np.asarray(tensor.data).reshape(rows, -1)
    return blocks if rope_heads is None else unpermute_rope_rows(blocks, rope_heads)


def _load_quantized_head(model: torch.nn.Module, by_name: dict[str, GGUFTensor], gguf_path: Path) -> set[str]:
    """The output head (or the tied embeddings) kept quantized when the file stores it in a
    kernel format; returns the checkpoint name it consumed (none otherwise)."""
    head = getattr(model, "lm_head", None)
    name = "lm_head.weight"
    if head is None:
        head, name = model.model.embed_tokens, "model.embed_tokens.weight"
    tensor = by_name.get(name)
    if tensor is None or tensor.type_name not in QUANTIZED_TYPE_NAMES or head.tp is not None:
        return set()
    if tuple(tensor.shape) != tuple(head.weight.shape):
        return set()  # the dense loader reports the mismatch
    if tensor.type_name == "Q8_0":
        head.use_q8(Q8Weight(*q8_0_levels_scales(tensor)))
    else:
        blocks = [(tensor.type_name, _row_blocks(tensor, None))]
        head.use_quantized(_matrix(gguf_path, [name], blocks, tensor.shape[1]))
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
