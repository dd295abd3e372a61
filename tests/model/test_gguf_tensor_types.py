"""The header-only tensor-type scan (`gguf_weights="auto"` reads it) agrees with the full parser
and refuses damaged files."""

from __future__ import annotations

import pytest
from gguf_testing import TinySpec, write_tiny_gguf

from sglr.errors import GGUFFormatError
from sglr.model.gguf.reader import read_gguf
from sglr.model.gguf.tensor_types import gguf_tensor_types, raw_tensor_bytes, read_tensor_table
from sglr.model.weights_policy import runs_quantized_by_default


def test_types_equal_the_full_parsers(tmp_path) -> None:
    write_tiny_gguf(tmp_path / "t.gguf", TinySpec())  # Q4_0, Q4_1, Q8_0, F16, F32, a vocabulary
    types = gguf_tensor_types(tmp_path / "t.gguf")
    assert types == {t.name: t.ggml_type.value for t in read_gguf(tmp_path / "t.gguf").tensors}
    assert len(set(types.values())) >= 4
    table = read_tensor_table(tmp_path / "t.gguf")
    assert table.architecture == "llama"
    raw = raw_tensor_bytes(tmp_path / "t.gguf", table)
    for tensor in read_gguf(tmp_path / "t.gguf").tensors:
        assert raw[tensor.name].tobytes() == tensor.data.tobytes(), tensor.name
    assert runs_quantized_by_default(tmp_path / "t.gguf")
    write_tiny_gguf(tmp_path / "f32.gguf", TinySpec(tensor_types={}))
    assert not runs_quantized_by_default(tmp_path / "f32.gguf")


def test_damaged_headers_are_format_errors(tmp_path) -> None:
    write_tiny_gguf(tmp_path / "t.gguf", TinySpec())
    data = (tmp_path / "t.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:200])
    (tmp_path / "other.bin").write_bytes(b"NOPE" + data[4:])
    for name in ("cut.gguf", "other.bin"):
        with pytest.raises(GGUFFormatError):
            gguf_tensor_types(tmp_path / name)
    # A complete header whose data is cut short: the table reads, the bytes do not.
    (tmp_path / "short.gguf").write_bytes(data[: len(data) - 64])
    with pytest.raises(GGUFFormatError, match="truncated"):
        raw_tensor_bytes(tmp_path / "short.gguf", read_tensor_table(tmp_path / "short.gguf"))
