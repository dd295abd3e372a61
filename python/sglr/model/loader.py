"""Checkpoint loading: resolve a model path, stream safetensors (single or sharded) into a model.

Weights are read one tensor at a time and copied (with a dtype cast) straight into the model's
parameters, so peak host memory is one tensor, not the checkpoint. Name mapping and fused
projections are the model's business (`model.load_weights`); this module only finds and reads
files.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from sglr.errors import CheckpointError, ModelNotFoundError
from sglr.model.lazy_tensor import LazyTensor, SliceReader

_INDEX_NAME = "model.safetensors.index.json"
_BIN_INDEX_NAME = "pytorch_model.bin.index.json"


def resolve_checkpoint_dir(model_path: str | Path | None, gguf_dtype: str = "float32") -> Path:
    """A Hugging Face-format directory for `model_path`.

    Local paths go through `sglr.model.default_model.resolve_model_path`: None is the embedded
    default model, a `.gguf` file is converted (weights dequantized to `gguf_dtype`) and cached,
    a directory with `config.json` is itself. A path that does not exist but looks like a Hub id
    (`org/name`) is downloaded (config, tokenizer, safetensors) when a network is there.
    Raises `ModelNotFoundError` when nothing usable is found.
    """
    from sglr.model.default_model import resolve_model_path

    name = None if model_path is None else str(model_path)
    if name is None or Path(name).expanduser().exists() or not _looks_like_hub_id(name):
        return resolve_model_path(model_path, dtype=gguf_dtype)
    try:
        from huggingface_hub import snapshot_download

        patterns = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt"]
        return Path(snapshot_download(name, allow_patterns=patterns))
    except Exception as exc:  # no network, no such repo, gated: all mean "cannot resolve"
        raise ModelNotFoundError(
            f"{name!r} is not a local path and could not be fetched from the Hugging Face Hub: {exc}"
        ) from exc


def _looks_like_hub_id(name: str) -> bool:
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not name.endswith(".gguf")


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


def iter_checkpoint_tensors(
    model_dir: Path, lazy: bool = False
) -> Iterator[tuple[str, torch.Tensor | LazyTensor]]:
    """Yields `(name, cpu_tensor)` for every tensor of the checkpoint, one at a time.

    With `lazy`, safetensors entries come as `LazyTensor`s (read when used, and a slice of one
    reads only that slice: how a tensor-parallel rank reads only its shard). The consumer must
    use each before asking for the next.
    """
    for path in checkpoint_files(model_dir):
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    stored = f.get_slice(name) if lazy else None
                    if stored is None or not stored.get_shape():  # eager, or a scalar
                        yield name, f.get_tensor(name)
                        continue
                    yield name, LazyTensor.whole(_slice_reader(stored), tuple(stored.get_shape()))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            yield from state.items()
            del state


def _slice_reader(stored: Any) -> SliceReader:
    def read(index: tuple[slice, ...]) -> torch.Tensor:
        return stored[index]

    return read


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


def release_freed_heap() -> None:
    """Hands the heap memory freed since (transient reads and conversions while loading, a large
    batch's activations: megabytes each, which glibc keeps for reuse) back to the OS, so resident
    memory is what is in use. A no-op where glibc's `malloc_trim` is missing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
