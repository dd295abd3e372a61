"""Checkpoint loading: resolve a model path, stream safetensors (single or sharded) into a model.

Weights are read one tensor at a time and copied (with a dtype cast) straight into the model's
parameters, so peak host memory is one tensor, not the checkpoint. Name mapping and fused
projections are the model's business (`model.load_weights`); this module only finds and reads
files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch

from sglr.errors import CheckpointError

_INDEX_NAME = "model.safetensors.index.json"
_BIN_INDEX_NAME = "pytorch_model.bin.index.json"


def resolve_model_path(model_path: str | Path) -> Path:
    """A local directory as is; otherwise a Hugging Face Hub id, downloaded (config, tokenizer,
    safetensors) into the Hub cache. Raises `CheckpointError` when neither works."""
    path = Path(model_path).expanduser()
    if path.is_dir():
        return path
    name = str(model_path)
    if path.exists() or name.count("/") != 1 or name.startswith((".", "/", "~")):
        raise CheckpointError(f"model path {name!r} is not a directory")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        raise CheckpointError(f"{name!r} is not a local directory and huggingface_hub is missing") from None
    try:
        return Path(
            snapshot_download(
                name, allow_patterns=["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt"]
            )
        )
    except Exception as exc:  # network, auth or missing repo: all mean "cannot resolve"
        raise CheckpointError(f"{name!r} is not a local directory and could not be fetched: {exc}") from exc


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The weight files of a checkpoint, in a stable order (safetensors preferred over .bin)."""
    for index_name, pattern in ((_INDEX_NAME, "*.safetensors"), (_BIN_INDEX_NAME, "*.bin")):
        index = model_dir / index_name
        if index.is_file():
            with index.open() as f:
                weight_map = json.load(f).get("weight_map", {})
            files = sorted({model_dir / name for name in weight_map.values()})
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise CheckpointError(f"{index_name} lists missing shard files: {missing}")
            return files
        found = sorted(model_dir.glob(pattern))
        if found:
            return found
    raise CheckpointError(f"no *.safetensors or *.bin weights in {model_dir}")


def iter_checkpoint_tensors(model_dir: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields `(name, cpu_tensor)` for every tensor of the checkpoint, one at a time."""
    for path in checkpoint_files(model_dir):
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    yield name, f.get_tensor(name)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            yield from state.items()
            del state


def fill_dummy_weights(model: torch.nn.Module, seed: int = 0, std: float = 0.02) -> None:
    """`load_format="dummy"`: seeded random weights of the real shapes (norm weights set to 1).

    Draws on the parameters' own device, so an 8B model initializes in seconds on a GPU.
    """
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            elif name.endswith(".bias"):
                param.zero_()
            else:
                param.normal_(0.0, std, generator=generator)
