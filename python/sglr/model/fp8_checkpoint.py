"""FP8 checkpoints: linear weights stored as float8_e4m3fn with their scales, loaded as stored into
fp8 `Linear`s (`Linear.use_fp8`), every other tensor through the dense loader.

Layouts (from `config.json`'s `quantization_config`):
- `quant_method: "compressed-tensors"` with 8-bit float weights (llm-compressor's FP8 and
  FP8_DYNAMIC schemes): `<linear>.weight_scale` per tensor (a scalar or `[1]`) or per channel
  (`[out, 1]`); a static `input_scale` is read past (activations are quantized per token).
- `quant_method: "fp8"`: block-wise `<linear>.weight_scale_inv` `[ceil(out/b0), ceil(in/b1)]`
  over `weight_block_size` `[b0, b1]` (128 x 128 when absent), the values multiply (the
  DeepSeek-V3 layout despite the name); or a per-tensor `weight_scale`.
A linear whose stored weight is not fp8 (an `ignore`d layer) loads dense; an fp8 tensor no fp8
linear takes (embeddings, the head, MoE experts) is a `CheckpointError`, never a silent cast.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from sglr.errors import CheckpointError, ModelConfigError
from sglr.kernels.fp8_linear import Fp8Weight
from sglr.model.fp8_weights import fp8_linears, linear_checkpoint_names
from sglr.model.layers import Linear
from sglr.model.lazy_tensor import LazyTensor, materialize
from sglr.model.loader import checkpoint_files

_SCALE_SUFFIXES = (".weight_scale", ".weight_scale_inv", ".input_scale")
# Per-layer KV cache scales as quantization tools write them (`fp8_kv_scales` reads them).
KV_SCALE_SUFFIXES = (
    ".self_attn.k_scale",
    ".self_attn.v_scale",
    ".k_proj.output_scale",
    ".v_proj.output_scale",
)


@dataclass(frozen=True)
class Fp8CheckpointLayout:
    """quant_method: "compressed-tensors" | "fp8"; block: `weight_block_size` (rows, cols) of a
    block-wise checkpoint, else None."""

    quant_method: str
    block: tuple[int, int] | None = None


def fp8_checkpoint_layout(model_dir: Path) -> Fp8CheckpointLayout | None:
    """The FP8 layout `config.json` declares; None without a `quantization_config`. Raises
    `ModelConfigError` for a quantization sglr does not load (other methods, int or 4-bit
    weights, e5m2)."""
    with (Path(model_dir) / "config.json").open() as f:
        spec = json.load(f).get("quantization_config")
    if spec is None:
        return None
    method = spec.get("quant_method")
    if method == "fp8":
        if spec.get("fmt", "e4m3") != "e4m3":
            raise ModelConfigError(f"fp8 checkpoints in {spec.get('fmt')!r} are not supported (only e4m3)")
        block = spec.get("weight_block_size")
        return Fp8CheckpointLayout("fp8", (int(block[0]), int(block[1])) if block else None)
    if method == "compressed-tensors":
        for name, group in (spec.get("config_groups") or {}).items():
            weights = group.get("weights") or {}
            if weights.get("type") != "float" or weights.get("num_bits") != 8:
                raise ModelConfigError(
                    f"compressed-tensors group {name!r}: only 8-bit float weights load, got "
                    f"{weights.get('num_bits')}-bit {weights.get('type')}"
                )
            if weights.get("strategy") not in ("tensor", "channel"):
                raise ModelConfigError(
                    f"compressed-tensors group {name!r}: weight strategy {weights.get('strategy')!r} "
                    "is not supported (tensor or channel)"
                )
        return Fp8CheckpointLayout("compressed-tensors")
    raise ModelConfigError(
        f"quantization_config quant_method {method!r} is not supported (fp8, compressed-tensors)"
    )


class _Tensors:
    """Every safetensors entry of a checkpoint by name, read lazily (files stay open)."""

    def __init__(self, model_dir: Path, stack: contextlib.ExitStack) -> None:
        from safetensors import safe_open

        self.entries = {}
        self._handles = {}
        for path in checkpoint_files(model_dir):
            if path.suffix != ".safetensors":
                raise CheckpointError(f"fp8 checkpoints load from safetensors, not {path.name}")
            handle = stack.enter_context(safe_open(str(path), framework="pt", device="cpu"))
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                self.entries[name] = handle.get_slice(name)
                self._handles[name] = handle

    def fp8_names(self) -> set[str]:
        return {name for name, entry in self.entries.items() if entry.get_dtype() == "F8_E4M3"}

    def lazy(self, name: str) -> LazyTensor:
        stored = self.entries[name]
        return LazyTensor.whole(lambda index: stored[index], tuple(stored.get_shape()))

    def full(self, name: str) -> torch.Tensor:
        return self._handles[name].get_tensor(name)


def load_fp8_checkpoint(model: torch.nn.Module, model_dir: Path, layout: Fp8CheckpointLayout) -> set[str]:
    """Loads every fp8-stored linear of `model` (this rank's slice) as fp8; returns the checkpoint
    names consumed or to skip (scales), which the dense loader must not see."""
    with contextlib.ExitStack() as stack:
        store = _Tensors(model_dir, stack)
        fp8_names = store.fp8_names()
        consumed = {name for name in store.entries if name.endswith(_SCALE_SUFFIXES + KV_SCALE_SUFFIXES)}
        device = next(p.device for p in model.parameters())
        for module_name, module in fp8_linears(model):
            names = linear_checkpoint_names(module_name, module)
            stored = [name in fp8_names for name in names]
            if not any(stored):
                continue  # kept in float by the quantizer (an ignored layer)
            if not all(stored):
                raise CheckpointError(f"{module_name}: some of {names} are fp8, some not")
            parts = [
                _shard(store, layout, module, shard, name)
                for shard, name in zip(_shards(module), names, strict=True)
            ]
            group_sizes = {group for _, _, group in parts}
            if len(group_sizes) != 1:
                raise CheckpointError(f"{module_name}: its parts' scales have different block sizes")
            weight = torch.cat([values for values, _, _ in parts]).to(device)
            scale = torch.cat([scale for _, scale, _ in parts]).to(device)
            group = group_sizes.pop()
            module.use_fp8(Fp8Weight(weight, scale, module.in_features if scale.shape[1] == 1 else group))
            consumed.update(names)
        left = sorted(fp8_names - consumed)
        if left:
            raise CheckpointError(
                f"{len(left)} fp8 tensors are not dense linear weights sglr loads as fp8 "
                f"(embeddings, the head and MoE experts load only in float): {', '.join(left[:3])}"
            )
    return consumed


def _shards(module: Linear) -> list[str | None]:
    return list(module.shard_offsets) or [None]


def _shard(
    store: _Tensors, layout: Fp8CheckpointLayout, module: Linear, shard: str | None, name: str
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """One checkpoint matrix's fp8 values and `[rows, G]` scales, this rank's slice of both, and
    the scales' column group size."""
    base = name.removesuffix(".weight")
    values = store.lazy(name)
    full_rows, full_cols = values.shape
    scale, group = _row_scales(store, layout, base, full_rows, full_cols)
    rows = module.shard_offsets[shard][1] if shard is not None else module.out_features
    start = module.row_starts.get(shard, 0)
    col_start = module.col_start or 0
    try:
        values = values.narrow(0, start, rows).narrow(1, col_start, module.in_features)
    except IndexError as exc:
        raise CheckpointError(
            f"{name}: checkpoint shape {(full_rows, full_cols)} does not split: {exc}"
        ) from exc
    scale = scale.narrow(0, start, rows)
    if scale.shape[1] > 1 and module.col_start is not None:
        if col_start % group:
            raise CheckpointError(
                f"{name}: a rank's columns start at {col_start}, inside a {group}-column scale block"
            )
        scale = scale.narrow(1, col_start // group, -(-module.in_features // group))
    return materialize(values), scale.contiguous(), group


def _row_scales(
    store: _Tensors, layout: Fp8CheckpointLayout, base: str, rows: int, cols: int
) -> tuple[torch.Tensor, int]:
    """The matrix's scales as fp32 `[rows, G]` (a block's scale repeated over its rows) and the
    columns each scale column covers."""
    if f"{base}.weight_scale_inv" in store.entries:
        block_rows, block_cols = layout.block or (128, 128)
        scale = store.full(f"{base}.weight_scale_inv").to(torch.float32)
        expected = (-(-rows // block_rows), -(-cols // block_cols))
        if tuple(scale.shape) != expected:
            raise CheckpointError(f"{base}.weight_scale_inv: shape {tuple(scale.shape)} != {expected}")
        return scale.repeat_interleave(block_rows, dim=0)[:rows], block_cols
    if f"{base}.weight_scale" not in store.entries:
        raise CheckpointError(f"{base}: fp8 weight without weight_scale or weight_scale_inv")
    scale = store.full(f"{base}.weight_scale").to(torch.float32)
    if scale.numel() == 1:
        return scale.reshape(1, 1).expand(rows, 1), cols
    if scale.numel() == rows and scale.dim() <= 2 and scale.shape[0] == rows:
        return scale.reshape(rows, 1), cols
    raise CheckpointError(
        f"{base}.weight_scale: shape {tuple(scale.shape)} is neither per tensor nor [{rows}, 1]"
    )


def fp8_kv_scales(model_dir: Path, num_layers: int) -> Iterator[tuple[int, str, float]]:
    """(layer, "k" | "v", scale) for each per-layer KV cache scale the checkpoint stores."""
    with contextlib.ExitStack() as stack:
        store = _Tensors(model_dir, stack)
        for name in store.entries:
            if not name.endswith(KV_SCALE_SUFFIXES) or ".layers." not in name:
                continue
            layer = int(name.split(".layers.", 1)[1].split(".", 1)[0])
            if layer < num_layers:
                kind = "k" if name.endswith(("k_scale", "k_proj.output_scale")) else "v"
                yield layer, kind, float(store.full(name).float().reshape(-1)[0])
