"""A checkpoint tensor not yet read: its shape is known, and a slice of it reads only that slice.

Under tensor parallelism each rank keeps a slice of most weights. Loading through `LazyTensor`
lets `checkpoint_slice` narrow first and read after, so a rank reads (and holds) about `1/tp` of
a sharded checkpoint instead of every tensor in full. Anything else done to a `LazyTensor` (a
method call, a torch function) reads the whole tensor first and then behaves as that tensor, so a
model's loader that reshapes or splits tensors stays correct, only not frugal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# Reads the given index (a tuple of slices, one per dimension) from the stored tensor.
SliceReader = Callable[[tuple[slice, ...]], torch.Tensor]


class LazyTensor:
    def __init__(self, read: SliceReader, index: tuple[slice, ...]) -> None:
        self._read = read
        self._index = index  # the part of the stored tensor this one is
        self.shape = torch.Size(s.stop - s.start for s in index)

    @classmethod
    def whole(cls, read: SliceReader, shape: tuple[int, ...]) -> LazyTensor:
        return cls(read, tuple(slice(0, n) for n in shape))

    def narrow(self, dim: int, start: int, length: int) -> LazyTensor:
        """As `torch.Tensor.narrow`, without reading anything."""
        dim = dim % len(self.shape)
        if start < 0 or length < 0 or start + length > self.shape[dim]:
            raise IndexError(
                f"narrow({dim}, {start}, {length}) outside a tensor of shape {tuple(self.shape)}"
            )
        index = list(self._index)
        base = index[dim].start
        index[dim] = slice(base + start, base + start + length)
        return LazyTensor(self._read, tuple(index))

    def dim(self) -> int:
        return len(self.shape)

    def materialize(self) -> torch.Tensor:
        return self._read(self._index)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.materialize(), name)

    def __getitem__(self, key: Any) -> torch.Tensor:
        return self.materialize()[key]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return func(*_materialized(args), **dict(zip(kwargs, _materialized(kwargs.values()), strict=True)))


def materialize(tensor: torch.Tensor | LazyTensor) -> torch.Tensor:
    return tensor.materialize() if isinstance(tensor, LazyTensor) else tensor


def _materialized(values: Any) -> list[Any]:
    out = []
    for value in values:
        if isinstance(value, (list, tuple)):
            value = type(value)(_materialized(value))
        out.append(materialize(value))
    return out
