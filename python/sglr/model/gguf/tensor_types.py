"""A GGUF file's tensor table, read from its header alone: each tensor's storage type, and its
raw bytes as a view of the memory-mapped file.

`read_gguf` parses all metadata (a vocabulary of tens of thousands of strings: ~2.4 s for
SmolLM2); deciding whether a file has 4-bit matrices (`gguf_weights="auto"`) and loading those
blocks need only the tensor table, reached by skipping the metadata values here (~0.05 s).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sglr.errors import GGUFFormatError

# Fixed-size metadata value types (GGUF type code -> bytes); 8 = string, 9 = array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
# Arrays of arrays are rare in GGUF files; nested deeper, a file is damaged (and each level
# is a level of recursion here and in the `gguf` parser).
_MAX_ARRAY_NESTING = 8


@dataclass(frozen=True)
class TensorEntry:
    name: str
    ggml_type: int  # GGML type code, e.g. 2 = Q4_0, 3 = Q4_1, 8 = Q8_0
    dims: tuple[int, ...]  # as GGUF lists them (innermost first)
    offset: int  # from the start of the data section


@dataclass(frozen=True)
class TensorTable:
    architecture: str | None
    data_start: int  # file offset of the data section
    entries: tuple[TensorEntry, ...]


def gguf_tensor_types(path: str | Path) -> dict[str, int]:
    """Tensor name -> GGML type code. Raises `GGUFFormatError` on a malformed header."""
    return {entry.name: entry.ggml_type for entry in read_tensor_table(path).entries}


def read_tensor_table(path: str | Path) -> TensorTable:
    """The header's tensor table (and `general.architecture`). Raises `GGUFFormatError` on a
    file that is not a well-formed GGUF header: every length and count in it is checked
    against the file's size before anything relies on it (`read_gguf` walks the header here
    first, since the `gguf` parser loops over a forged array count element by element)."""
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(data)
    except (OSError, ValueError, struct.error, IndexError) as error:  # UnicodeDecodeError: a ValueError
        raise GGUFFormatError(
            f"{path}: corrupt or truncated GGUF header ({type(error).__name__}: {error})"
        ) from error


def raw_tensor_bytes(path: str | Path, table: TensorTable) -> dict[str, np.ndarray]:
    """Each tensor's bytes (uint8, read-only views of the memory-mapped file), by GGUF name.
    Raises `GGUFFormatError` when a tensor runs past the end of the file."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    file_bytes = np.memmap(path, dtype=np.uint8, mode="r")
    views = {}
    for entry in table.entries:
        try:
            block_len, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(entry.ggml_type)]
        except (ValueError, KeyError):
            raise GGUFFormatError(
                f"{path}: tensor {entry.name!r} has an unknown storage type {entry.ggml_type}"
            ) from None
        # Python ints: a forged dimension must not wrap around to a small product.
        num_bytes = math.prod(entry.dims) // block_len * block_bytes
        start = table.data_start + entry.offset
        if start + num_bytes > len(file_bytes):
            raise GGUFFormatError(f"{path}: truncated GGUF file: tensor {entry.name!r} ends past the file")
        views[entry.name] = file_bytes[start : start + num_bytes]
    return views


def _parse(data: mmap.mmap) -> TensorTable:
    if data[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    version, num_tensors, num_fields = struct.unpack_from("<IQQ", data, 4)
    if version < 2:
        raise ValueError(f"GGUF version {version} is not supported")
    offset = 24
    architecture, alignment = None, 32
    for _ in range(num_fields):
        key_end = _skip_string(data, offset)
        key = bytes(data[offset + 8 : key_end])
        (value_type,) = struct.unpack_from("<I", data, key_end)
        value_start = key_end + 4
        offset = _skip_value(data, value_start, value_type)
        if key == b"general.architecture" and value_type == _STRING:
            architecture = bytes(data[value_start + 8 : offset]).decode("utf-8")
        elif key == b"general.alignment" and value_type == 4:
            (alignment,) = struct.unpack_from("<I", data, value_start)
    entries = []
    for _ in range(num_tensors):
        (name_len,) = struct.unpack_from("<Q", data, offset)
        name = bytes(data[offset + 8 : offset + 8 + name_len]).decode("utf-8")
        offset += 8 + name_len
        (num_dims,) = struct.unpack_from("<I", data, offset)
        dims = struct.unpack_from(f"<{num_dims}Q", data, offset + 4)
        offset += 4 + 8 * num_dims
        ggml_type, tensor_offset = struct.unpack_from("<IQ", data, offset)
        offset += 12
        entries.append(TensorEntry(name, ggml_type, tuple(dims), tensor_offset))
    if alignment <= 0:
        raise ValueError(f"alignment {alignment}")
    data_start = -(-offset // alignment) * alignment
    return TensorTable(architecture, data_start, tuple(entries))


def _skip_string(data: mmap.mmap, offset: int) -> int:
    (length,) = struct.unpack_from("<Q", data, offset)
    end = offset + 8 + length
    if end > len(data):
        raise ValueError("a string runs past the end of the file")
    return end


def _skip_value(data: mmap.mmap, offset: int, value_type: int, depth: int = 0) -> int:
    if value_type == _STRING:
        return _skip_string(data, offset)
    if value_type in _SCALAR_SIZES:
        end = offset + _SCALAR_SIZES[value_type]
    elif value_type != _ARRAY:
        raise ValueError(f"unknown metadata value type {value_type}")
    elif depth >= _MAX_ARRAY_NESTING:
        raise ValueError(f"metadata arrays nested deeper than {_MAX_ARRAY_NESTING} levels")
    else:
        element_type, count = struct.unpack_from("<IQ", data, offset)
        end = offset + 12
        if element_type in _SCALAR_SIZES:
            end += count * _SCALAR_SIZES[element_type]
        else:  # each element reads at least 8 bytes: a forged count ends at the end of the file
            for _ in range(count):
                end = _skip_value(data, end, element_type, depth + 1)
    if end > len(data):
        raise ValueError("a metadata value runs past the end of the file")
    return end
