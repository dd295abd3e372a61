"""Reading a GGUF file: its metadata and a view of each tensor, with typed errors for bad files.

The `gguf` package does the parsing; this module turns whatever it raises on a malformed file
into `GGUFFormatError` naming the file, and checks what the parser leaves unchecked: before it,
that every length and count in the header fits the file (`tensor_types`); after it, that every
tensor's bytes lie inside the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sglr.errors import GGUFFormatError, ModelNotFoundError
from sglr.model.gguf.tensor_types import read_tensor_table

GGUF_MAGIC = b"GGUF"
# Magic (4 bytes), version (4), tensor count (8) and metadata count (8).
_MIN_HEADER_LEN = 24


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor as stored: `data` is a read-only view into the file (raw blocks when quantized)."""

    name: str
    ggml_type: Any  # gguf.GGMLQuantizationType
    # Row-major (numpy / PyTorch) order, e.g. [out_features, in_features]; GGUF lists it reversed.
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def type_name(self) -> str:
        return self.ggml_type.name


@dataclass(frozen=True)
class GGUFCheckpoint:
    """A parsed GGUF file: metadata as plain Python values and its tensors in file order."""

    path: Path
    metadata: Mapping[str, Any]
    tensors: tuple[GGUFTensor, ...]

    @property
    def architecture(self) -> str:
        return str(self.require("general.architecture"))

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        """The value of a metadata key this converter cannot do without."""
        if key not in self.metadata:
            raise GGUFFormatError(f"{self.path}: GGUF metadata has no {key!r}")
        return self.metadata[key]

    def arch_get(self, suffix: str, default: Any = None) -> Any:
        """`{architecture}.{suffix}`, e.g. `llama.block_count`."""
        return self.get(f"{self.architecture}.{suffix}", default)

    def arch_require(self, suffix: str) -> Any:
        return self.require(f"{self.architecture}.{suffix}")

    def tensor_names(self) -> frozenset[str]:
        return frozenset(tensor.name for tensor in self.tensors)


def read_gguf(path: str | Path) -> GGUFCheckpoint:
    """Parses `path`. Raises `ModelNotFoundError` when it is not a readable file and
    `GGUFFormatError` when it is not a complete, well-formed GGUF file."""
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"GGUF file {path} does not exist or is not a file")
    file_len = path.stat().st_size
    with path.open("rb") as file:
        head = file.read(_MIN_HEADER_LEN)
    if file_len == 0:
        raise GGUFFormatError(f"{path}: empty file, not a GGUF checkpoint")
    if len(head) < 4 and GGUF_MAGIC.startswith(head):
        raise GGUFFormatError(f"{path}: truncated GGUF file ({file_len} bytes)")
    if head[:4] != GGUF_MAGIC:
        raise GGUFFormatError(f"{path}: not a GGUF file (starts with {head[:4]!r}, expected {GGUF_MAGIC!r})")
    if len(head) < _MIN_HEADER_LEN:
        raise GGUFFormatError(f"{path}: truncated GGUF file ({file_len} bytes, shorter than its header)")

    from gguf import GGUFReader

    # Every length and count checked against the file first: the parser below trusts them (a
    # forged array count made it loop for hours over bytes past the end of the file).
    read_tensor_table(path)
    try:
        reader = GGUFReader(path)
        metadata = {
            name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")
        }
        tensors = tuple(
            GGUFTensor(
                name=tensor.name,
                ggml_type=tensor.tensor_type,
                shape=tuple(int(dim) for dim in reversed(tensor.shape.tolist())),
                data=tensor.data,
            )
            for tensor in reader.tensors
        )
    # NOTE: the parser reads untrusted bytes and fails in many ways (ValueError, IndexError,
    # KeyError on an unknown type code, UnicodeDecodeError, ...); all of them mean a bad file.
    except Exception as error:
        raise GGUFFormatError(
            f"{path}: corrupt or truncated GGUF file ({type(error).__name__}: {error})"
        ) from error
    _check_tensor_extents(path, file_len, reader)
    return GGUFCheckpoint(path=path, metadata=metadata, tensors=tensors)


def _check_tensor_extents(path: Path, file_len: int, reader: Any) -> None:
    from gguf import GGML_QUANT_SIZES

    for tensor in reader.tensors:
        block_size, type_size = GGML_QUANT_SIZES[tensor.tensor_type]
        # Python ints: a forged dimension must not wrap around to a small product.
        num_elements = math.prod(int(dim) for dim in tensor.shape)
        expected_len = num_elements // block_size * type_size
        end = int(tensor.data_offset) + expected_len
        if end > file_len or tensor.data.nbytes != expected_len:
            raise GGUFFormatError(
                f"{path}: truncated GGUF file: tensor {tensor.name!r} needs bytes up to {end}, "
                f"the file has {file_len}"
            )
