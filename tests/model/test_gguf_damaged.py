"""Damaged GGUF files (`gguf_damage.py`: truncated, bits flipped, a count, length, type code,
dimension, offset or metadata value forged, arrays nested deep) through every reader: the full
parse (`read_gguf`), the header-only tensor table with its raw tensor views (the quantized load
path), and the whole conversion (`convert_gguf`). Each succeeds or raises a typed sglr error
(`SglrError`: `GGUFFormatError` for a malformed file), never another exception; and no
allocation grows with a forged number (traced allocations stay under a bound measured from the
undamaged file).

Cost: ~6 s at the default budget; `SGLR_FUZZ_SCALE=N` runs N times the examples."""

from __future__ import annotations

import contextlib
import itertools
import tracemalloc
from pathlib import Path

import pytest
from gguf_damage import damaged, forged, layout, nested_arrays
from gguf_testing import write_tiny_gguf
from hypothesis import given, note

from fuzz_support import fuzz_settings
from sglr.errors import GGUFFormatError, SglrError
from sglr.model.gguf import convert_gguf
from sglr.model.gguf.reader import read_gguf
from sglr.model.gguf.tensor_types import raw_tensor_bytes, read_tensor_table


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("gguf") / "good.gguf"
    write_tiny_gguf(path)
    return path.read_bytes()


def _traced_peak(action) -> int:
    """Peak bytes allocated (as tracemalloc sees them: Python objects and numpy buffers) by
    `action`, whatever it raises."""
    tracemalloc.start()
    try:
        action()
    except Exception:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _read_all(path: Path) -> None:
    read_gguf(path)
    raw_tensor_bytes(path, read_tensor_table(path))


def test_the_layout_walk_covers_the_whole_file(good: bytes, tmp_path: Path) -> None:
    slots = layout(good)
    assert {slot.kind for slot in slots} == {
        "count",
        "length",
        "type",
        "dims",
        "dim",
        "tensor_offset",
        "value",
    }
    table = read_tensor_table(_write(tmp_path, good))
    assert sum(slot.kind == "tensor_offset" for slot in slots) == len(table.entries) > 0


def _write(tmp_path: Path, data: bytes, name: str = "damaged.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_damaged_files_are_read_or_refused_typed(good: bytes, tmp_path: Path) -> None:
    bound = 4 * _traced_peak(lambda: _read_all(_write(tmp_path, good))) + (8 << 20)

    @fuzz_settings(60)
    @given(damaged(good))
    def run(case: tuple[str, bytes]) -> None:
        what, data = case
        note(what)
        path = _write(tmp_path, data)
        for read in (read_gguf, lambda p: raw_tensor_bytes(p, read_tensor_table(p))):
            try:
                read(path)
            except SglrError as error:
                assert isinstance(error, GGUFFormatError), f"{what}: {error!r}"
                assert str(path) in str(error), f"{what}: the error does not name the file: {error}"
        peak = _traced_peak(lambda: _read_all(path))
        assert peak <= bound, f"{what}: {peak} bytes allocated (the undamaged file: under {bound})"

    run()


def test_damaged_files_convert_or_fail_typed(good: bytes, tmp_path: Path) -> None:
    @fuzz_settings(20)
    @given(damaged(good))
    def run(case: tuple[str, bytes]) -> None:
        what, data = case
        note(what)
        with contextlib.suppress(SglrError):  # anything else fails the test
            convert_gguf(_write(tmp_path, data), tmp_path / "hf")

    run()


# Found by fuzzing: the `gguf` parser looped over a forged array count element by element
# (hours, on bytes past the end of the file), and nested arrays recursed without bound.
def test_a_forged_array_count_is_refused_at_once(good: bytes, tmp_path: Path) -> None:
    slots = layout(good)
    # The first array's count (its element type's slot comes just before it).
    count = next(b for a, b in itertools.pairwise(slots) if a.kind == "type" and b.kind == "count")
    path = _write(tmp_path, forged(good, count, 2**62))
    with pytest.raises(GGUFFormatError, match="runs past the end of the file"):
        read_gguf(path)


def test_arrays_nested_deep_are_refused(good: bytes, tmp_path: Path) -> None:
    path = _write(tmp_path, nested_arrays(good, layout(good), 100_000))
    with pytest.raises(GGUFFormatError, match="nested deeper than"):
        read_gguf(path)
    # Shallow nesting is a well-formed file: it reads, every tensor where it was.
    num_tensors = len(read_gguf(_write(tmp_path, good, "good.gguf")).tensors)
    shallow = read_gguf(_write(tmp_path, nested_arrays(good, layout(good), 3), "shallow.gguf"))
    assert "general.architecture" in shallow.metadata and len(shallow.tensors) == num_tensors


def test_a_forged_tensor_type_is_refused_by_the_tensor_views(good: bytes, tmp_path: Path) -> None:
    type_slot = [slot for slot in layout(good) if slot.kind == "type"][-1]  # the last tensor's
    path = _write(tmp_path, forged(good, type_slot, 99))
    with pytest.raises(GGUFFormatError, match="unknown storage type 99"):
        raw_tensor_bytes(path, read_tensor_table(path))


def test_a_forged_layer_count_is_refused_without_walking_it(good: bytes, tmp_path: Path) -> None:
    # Found by fuzzing: the names of 2**31 layers' tensors were listed before any was looked up
    # (all memory, then the process was killed).
    key = b"llama.block_count"
    at = good.index(key) + len(key) + 4  # the value, after the key and its type code
    path = _write(tmp_path, good[:at] + (2**31).to_bytes(4, "little") + good[at + 4 :])
    with pytest.raises(GGUFFormatError, match=r"no tensor 'blk\.2\.attn_norm\.weight'"):
        convert_gguf(path, tmp_path / "hf")
    assert _traced_peak(lambda: convert_gguf(path, tmp_path / "hf")) < 64 << 20
