"""FP8 twins of a tiny checkpoint for tests: the same model with its decoder-layer projections
stored as float8_e4m3fn plus scales in one of the layouts sglr loads, and beside it the
dequantized float32 checkpoint those values stand for (the reference a loaded FP8 model must
match).

Layouts: "per_tensor" and "per_channel" (compressed-tensors `weight_scale`, with a static
`input_scale` and one projection left in float through `ignore`, as llm-compressor writes them),
"block" (`quant_method: "fp8"`, `weight_scale_inv` per `block` of rows x columns).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from sglr.kernels.fp8_linear import FP8_DTYPE, FP8_MAX

FP8_LAYOUTS = ("per_tensor", "per_channel", "block")
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Kept in float by the compressed-tensors layouts' `ignore` list (a mixed checkpoint).
IGNORED_LINEAR = "model.layers.1.mlp.down_proj"


def write_fp8_twins(
    source: Path,
    out: Path,
    layout: str,
    block: tuple[int, int] = (48, 32),
    kv_scales: tuple[float, float] | None = None,
) -> tuple[Path, Path]:
    """Writes `out/fp8` (the FP8 checkpoint) and `out/dequantized` (its float32 values) from the
    tiny checkpoint `source`; `kv_scales` adds per-layer `self_attn.k_scale` / `v_scale`."""
    from safetensors.torch import load_file, save_file

    if layout not in FP8_LAYOUTS:
        raise ValueError(f"layout must be one of {FP8_LAYOUTS}, got {layout!r}")
    tensors = load_file(str(source / "model.safetensors"))
    config = json.loads((source / "config.json").read_text())
    stored: dict[str, torch.Tensor] = {}
    dense: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        module = name.removesuffix(".weight")
        quantize = name.endswith(".weight") and module.rsplit(".", 1)[-1] in _PROJECTIONS
        if not quantize or (layout != "block" and module == IGNORED_LINEAR):
            stored[name] = dense[name] = tensor.float()
            continue
        values, scale, dequantized = _quantize(tensor.float(), layout, block)
        stored[name] = values
        stored[f"{module}.weight_scale_inv" if layout == "block" else f"{module}.weight_scale"] = scale
        if layout == "per_tensor":
            stored[f"{module}.input_scale"] = torch.tensor([1.0])  # static; sglr quantizes per token
        dense[name] = dequantized
    if kv_scales is not None:
        for layer in range(config["num_hidden_layers"]):
            stored[f"model.layers.{layer}.self_attn.k_scale"] = torch.tensor(kv_scales[0])
            stored[f"model.layers.{layer}.self_attn.v_scale"] = torch.tensor(kv_scales[1])
    fp8_dir, dense_dir = out / "fp8", out / "dequantized"
    for directory, weights, quantization in (
        (fp8_dir, stored, _quantization_config(layout, block)),
        (dense_dir, dense, None),
    ):
        directory.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            if path.is_file() and path.suffix != ".safetensors" and path.name != "config.json":
                shutil.copy(path, directory / path.name)
        spec = dict(config, torch_dtype="float32")
        if quantization is not None:
            spec["quantization_config"] = quantization
        (directory / "config.json").write_text(json.dumps(spec, indent=2) + "\n")
        save_file({k: v.contiguous() for k, v in weights.items()}, str(directory / "model.safetensors"))
    return fp8_dir, dense_dir


def _quantize(
    weight: torch.Tensor, layout: str, block: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(e4m3 values, the stored scale, the float32 weight they stand for)."""
    rows, cols = weight.shape
    if layout == "per_tensor":
        scale = weight.abs().amax().reshape(1) / FP8_MAX
        expanded = scale.reshape(1, 1).expand(rows, cols)
    elif layout == "per_channel":
        scale = weight.abs().amax(dim=1, keepdim=True) / FP8_MAX
        expanded = scale.expand(rows, cols)
    else:
        block_rows, block_cols = block
        padded = torch.zeros(-(-rows // block_rows) * block_rows, -(-cols // block_cols) * block_cols)
        padded[:rows, :cols] = weight.abs()
        grid = padded.view(
            padded.shape[0] // block_rows, block_rows, padded.shape[1] // block_cols, block_cols
        )
        scale = grid.amax(dim=(1, 3)) / FP8_MAX
        expanded = scale.repeat_interleave(block_rows, 0).repeat_interleave(block_cols, 1)[:rows, :cols]
    values = (weight / expanded).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return values, scale, values.to(torch.float32) * expanded


def _quantization_config(layout: str, block: tuple[int, int]) -> dict:
    if layout == "block":
        return {
            "quant_method": "fp8",
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "weight_block_size": list(block),
        }
    strategy = "tensor" if layout == "per_tensor" else "channel"
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": strategy, "symmetric": True},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
            }
        },
        "ignore": ["lm_head", IGNORED_LINEAR],
    }
