"""Damage for a valid GGUF file, for the fuzz tests of the readers (`test_gguf_damaged.py`): where
each structural field of the file lies (counts, lengths, type codes, dimensions, offsets, the
metadata's scalar values), and hypothesis strategies that truncate the file, flip its bits, or
forge one of those fields with a hostile value."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hypothesis import strategies as st

# GGUF metadata value types: fixed sizes (code -> bytes); 8 = string, 9 = array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_ALIGNMENT = 32
# Values a forged field takes: zero, one, the edges of u32 / u64, a little past the file.
_HOSTILE = (0, 1, 7, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1)


@dataclass(frozen=True)
class Slot:
    """One field of the file: where it starts, how wide it is (4 or 8 bytes), and what it holds."""

    offset: int
    width: int
    kind: str  # "count", "length", "type", "dims", "dim", "tensor_offset", "value"


def layout(data: bytes) -> list[Slot]:
    """Every structural field of a well-formed GGUF (v2/v3) file, in file order."""
    slots = [Slot(8, 8, "count"), Slot(16, 8, "count")]
    num_tensors, num_fields = struct.unpack_from("<QQ", data, 8)
    offset = 24
    for _ in range(num_fields):
        offset = _string(data, offset, slots)
        (value_type,) = struct.unpack_from("<I", data, offset)
        slots.append(Slot(offset, 4, "type"))
        offset = _value(data, offset + 4, value_type, slots)
    for _ in range(num_tensors):
        offset = _string(data, offset, slots)
        (num_dims,) = struct.unpack_from("<I", data, offset)
        slots.append(Slot(offset, 4, "dims"))
        offset += 4
        slots += [Slot(offset + 8 * k, 8, "dim") for k in range(num_dims)]
        offset += 8 * num_dims
        slots += [Slot(offset, 4, "type"), Slot(offset + 4, 8, "tensor_offset")]
        offset += 12
    return slots


def _string(data: bytes, offset: int, slots: list[Slot]) -> int:
    (length,) = struct.unpack_from("<Q", data, offset)
    slots.append(Slot(offset, 8, "length"))
    return offset + 8 + length


def _value(data: bytes, offset: int, value_type: int, slots: list[Slot]) -> int:
    if value_type in _SCALAR_SIZES:
        size = _SCALAR_SIZES[value_type]
        if size >= 4:
            slots.append(Slot(offset, size, "value"))
        return offset + size
    if value_type == _STRING:
        return _string(data, offset, slots)
    element_type, count = struct.unpack_from("<IQ", data, offset)
    slots += [Slot(offset, 4, "type"), Slot(offset + 4, 8, "count")]
    offset += 12
    if element_type in _SCALAR_SIZES:
        return offset + count * _SCALAR_SIZES[element_type]
    for _ in range(count):
        offset = _value(data, offset, element_type, slots)
    return offset


def forged(data: bytes, slot: Slot, value: int) -> bytes:
    raw = (value % 2 ** (8 * slot.width)).to_bytes(slot.width, "little")
    return data[: slot.offset] + raw + data[slot.offset + slot.width :]


def nested_arrays(data: bytes, slots: list[Slot], depth: int) -> bytes:
    """The file with its first metadata value (a string: `general.architecture`) replaced by
    arrays nested `depth` deep, the innermost empty."""
    first_type = next(slot for slot in slots if slot.kind == "type")
    length = slots[slots.index(first_type) + 1]
    assert length.kind == "length" and length.offset == first_type.offset + 4
    (num_bytes,) = struct.unpack_from("<Q", data, length.offset)
    nest = struct.pack("<IIQ", _ARRAY, _ARRAY, 1) + struct.pack("<IQ", _ARRAY, 1) * (depth - 2)
    nest += struct.pack("<IQ", 4, 0)
    # The header changes length: the tensor data moves to the next aligned offset after it
    # (the writer's default alignment, 32), so only the nested value is wrong.
    header_end = max(slot.offset + slot.width for slot in slots)
    header = data[: first_type.offset] + nest + data[length.offset + 8 + num_bytes : header_end]
    return header + bytes(-len(header) % _ALIGNMENT) + data[-(-header_end // _ALIGNMENT) * _ALIGNMENT :]


@st.composite
def damaged(draw, data: bytes) -> tuple[str, bytes]:
    """A damaged copy of `data` and what was done to it."""
    slots = layout(data)
    kind = draw(st.sampled_from(["truncate", "flip", "forge", "forge", "forge_value", "nest"]))
    if kind == "truncate":
        cut = draw(st.integers(0, len(data) - 1))
        return f"truncated at {cut}", data[:cut]
    if kind == "flip":
        flipped = bytearray(data)
        for at in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=8)):
            flipped[at] ^= 1 << draw(st.integers(0, 7))
        return "bits flipped", bytes(flipped)
    if kind == "nest":
        depth = draw(st.sampled_from([2, 100, 10_000]))
        return f"arrays nested {depth} deep", nested_arrays(data, slots, depth)
    wanted = "value" if kind == "forge_value" else None
    slot = draw(st.sampled_from([s for s in slots if (s.kind == "value") == (wanted == "value")]))
    value = draw(st.sampled_from(_HOSTILE) | st.integers(0, 2**64 - 1) | st.just(len(data)))
    return f"{slot.kind} at {slot.offset} forged to {value}", forged(data, slot, value)
