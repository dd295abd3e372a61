"""GGUF file -> Hugging Face-format checkpoint directory (config, safetensors, tokenizer)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from sglr.errors import GGUFFormatError
from sglr.model.family import GGUF_EXPERT, GgufLayout
from sglr.model.gguf.dequant import check_supported, dequantize
from sglr.model.gguf.hf_config import build_generation_config, build_hf_config, gguf_family
from sglr.model.gguf.names import expected_hf_shape, hf_tensor_name, unpermute_rope_rows
from sglr.model.gguf.reader import GGUFCheckpoint, read_gguf
from sglr.model.gguf.tokenizer import build_tokenizer_files

RUN_DTYPES = ("float32", "float16", "bfloat16")

# The files a converted directory holds; `config.json` is written last.
CONVERTED_FILES = (
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "generation_config.json",
    "config.json",
)


def check_run_dtype(dtype: str) -> None:
    if dtype not in RUN_DTYPES:
        raise ValueError(f"unsupported run dtype {dtype!r} (supported: {', '.join(RUN_DTYPES)})")


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, *, dtype: str = "float32") -> None:
    """Writes the Hugging Face-format form of `gguf_path` into `out_dir` (created if missing),
    weights dequantized to `dtype`. Everything is validated before the first weight is decoded,
    so an unsupported file fails fast. Not atomic: `sglr.model.gguf.cache` makes it so."""
    check_run_dtype(dtype)
    checkpoint = read_gguf(gguf_path)
    _, layout = gguf_family(checkpoint)
    for tensor in checkpoint.tensors:
        check_supported(tensor)
        hf_tensor_name(tensor.name, layout)
    config = build_hf_config(checkpoint, dtype)
    tokenizer_json, tokenizer_config = build_tokenizer_files(checkpoint)
    state_dict = convert_tensors(checkpoint, layout, config, dtype)

    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(state_dict, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    _write_json(out_dir / "tokenizer_config.json", tokenizer_config)
    _write_json(out_dir / "generation_config.json", build_generation_config(checkpoint))
    _write_json(out_dir / "config.json", config)
    for name in CONVERTED_FILES:
        _fsync(out_dir / name)


def convert_tensors(
    checkpoint: GGUFCheckpoint, layout: GgufLayout, config: dict[str, Any], dtype: str
) -> dict[str, Any]:
    """Hugging Face name -> torch tensor in `dtype`: query/key rows put back where the file's
    converter reordered them, `1 + w` norm weights back to `w`."""
    import torch

    torch_dtype = getattr(torch, dtype)
    restore_rope_rows = layout.rope_rows_permuted
    state_dict = {}
    for tensor in checkpoint.tensors:
        hf_name = hf_tensor_name(tensor.name, layout)
        if hf_name is None:
            continue
        expected_shape = expected_hf_shape(hf_name, config)
        if tensor.shape != expected_shape:
            raise GGUFFormatError(
                f"{checkpoint.path}: tensor {tensor.name!r} has shape {list(tensor.shape)}, "
                f"the metadata implies {list(expected_shape)}"
            )
        values = dequantize(tensor)
        if restore_rope_rows and ".q_proj." in hf_name:
            values = unpermute_rope_rows(values, config["num_attention_heads"])
        elif restore_rope_rows and ".k_proj." in hf_name:
            values = unpermute_rope_rows(values, config["num_key_value_heads"])
        if layout.norm_offset and hf_name.endswith("norm.weight"):
            values = values - np.float32(1.0)
        if GGUF_EXPERT in hf_name:  # stacked experts: one tensor each
            for expert, expert_values in enumerate(values):
                state_dict[hf_name.replace(GGUF_EXPERT, str(expert))] = torch.from_numpy(expert_values).to(
                    torch_dtype
                )
            continue
        if hf_name.endswith("shared_expert_gate.weight"):
            values = values.reshape(1, -1)  # one gate row, stored as a vector
        state_dict[hf_name] = torch.from_numpy(values).to(torch_dtype)
    return state_dict


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
