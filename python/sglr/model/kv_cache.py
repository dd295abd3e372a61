"""The KV pool's memory: per-layer K and V rows indexed by slot id (page size 1).

`KVCache` owns the tensors only. Which slot holds which token is decided elsewhere: the
engine's `KVSlotAllocator` hands out slot ids `1..num_slots`, and the radix tree indexes them.
Slot 0 is a real row that no request owns: padded batch entries (CUDA-graph padding) write
their K/V there and read it back, so padding never touches live data.

An fp8 cache (`KVCacheShape.dtype` float8_e4m3fn, `kv_cache_dtype="fp8_e4m3"`) stores
`clamp(k / k_scale)` as e4m3 with one k_scale and one v_scale per layer (1.0 unless the
checkpoint gives them); readers multiply back (`scales`).
"""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass

import numpy as np
import torch

from sglr.errors import KVCacheCapacityError
from sglr.kernels.fp8_linear import FP8_DTYPE, FP8_MAX
from sglr.model.config import ModelConfig

PADDING_SLOT = 0


@dataclass(frozen=True)
class KVCacheShape:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype

    @classmethod
    def of(cls, config: ModelConfig, dtype: torch.dtype) -> KVCacheShape:
        return cls(config.num_hidden_layers, config.num_key_value_heads, config.head_dim, dtype)

    @property
    def bytes_per_token(self) -> int:
        """K and V of one token over all layers."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * itemsize

    def num_tokens_for_bytes(self, num_bytes: int) -> int:
        """How many slots (excluding the padding slot) fit into `num_bytes`."""
        return max(0, num_bytes // self.bytes_per_token - 1)


def _zeros(dims: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zeroed buffer. On the CPU an anonymous mapping: the OS hands out zero pages as they are
    first written, so the resident size grows with the slots in use, not the pool's capacity
    (a 16k-slot pool of a small model is hundreds of MB that a short session never touches).
    Not numpy's calloc: numpy asks for transparent huge pages on large arrays, and then writing
    one slot of a layer makes 2 MiB of it resident (a 512-token prompt: +255 MB on SmolLM2
    instead of +12 MB)."""
    if device.type != "cpu":
        return torch.zeros(dims, dtype=dtype, device=device)
    num_bytes = math.prod(dims) * torch.empty((), dtype=dtype).element_size()
    # The numpy array keeps the mapping alive, the tensor keeps the array. The data starts 16
    # bytes into the mapping, where malloc puts a large block: rust/kernels' decode attention over
    # SmolLM2's cache measured 2.6 ms per step page-aligned against 2.0 ms there (one thread).
    pages = np.frombuffer(mmap.mmap(-1, num_bytes + 64), dtype=np.uint8)[16 : 16 + num_bytes]
    return torch.from_numpy(pages).view(dtype).view(dims)


class KVCache:
    """K and V buffers `[num_layers, num_slots + 1, num_kv_heads, head_dim]`; row 0 is padding.

    `k_cache(layer)` / `v_cache(layer)` are contiguous `[num_slots + 1, Hkv, D]` views, the
    layout every attention backend reads (FlashInfer sees it as pages of size 1). The cache is
    the kernels' `PagedKVPool`.
    """

    def __init__(self, shape: KVCacheShape, num_slots: int, device: torch.device | str) -> None:
        if num_slots < 1:
            raise KVCacheCapacityError(f"the KV cache needs at least 1 slot, got {num_slots}")
        self.shape = shape
        self.num_slots = num_slots
        self.device = torch.device(device)
        dims = (shape.num_layers, num_slots + 1, shape.num_kv_heads, shape.head_dim)
        try:
            self.k_buffer = _zeros(dims, shape.dtype, self.device)
            self.v_buffer = _zeros(dims, shape.dtype, self.device)
        except (torch.OutOfMemoryError, MemoryError) as exc:
            raise KVCacheCapacityError(
                f"cannot allocate a KV cache of {num_slots} tokens "
                f"({num_slots * shape.bytes_per_token / 2**30:.2f} GiB)"
            ) from exc
        self.is_fp8 = shape.dtype == FP8_DTYPE
        self._scales = [(1.0, 1.0)] * shape.num_layers

    def set_scales(self, layer_id: int, k_scale: float, v_scale: float) -> None:
        """An fp8 cache's per-layer scales (before anything is stored)."""
        if not (k_scale > 0 and v_scale > 0):
            raise KVCacheCapacityError(
                f"layer {layer_id}: KV scales must be positive, got {k_scale}, {v_scale}"
            )
        self._scales[layer_id] = (float(k_scale), float(v_scale))

    def scales(self, layer_id: int) -> tuple[float, float]:
        """(k_scale, v_scale): what layer `layer_id`'s stored K and V values multiply by."""
        return self._scales[layer_id]

    @property
    def dtype(self) -> torch.dtype:
        return self.shape.dtype

    def k_cache(self, layer_id: int) -> torch.Tensor:
        return self.k_buffer[layer_id]

    def v_cache(self, layer_id: int) -> torch.Tensor:
        return self.v_buffer[layer_id]

    def store(self, layer_id: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Writes `k`, `v` `[T, Hkv, D]` into rows `slots` `[T]` (int64) of layer `layer_id`."""
        if self.is_fp8:
            # As bytes: index_copy_ has no fp8 kernel on the CPU.
            k_scale, v_scale = self._scales[layer_id]
            self.k_buffer[layer_id].view(torch.uint8).index_copy_(
                0, slots, _to_fp8(k, k_scale).view(torch.uint8)
            )
            self.v_buffer[layer_id].view(torch.uint8).index_copy_(
                0, slots, _to_fp8(v, v_scale).view(torch.uint8)
            )
            return
        dtype = self.dtype
        self.k_buffer[layer_id].index_copy_(0, slots, k if k.dtype == dtype else k.to(dtype))
        self.v_buffer[layer_id].index_copy_(0, slots, v if v.dtype == dtype else v.to(dtype))

    def memory_bytes(self) -> int:
        return 2 * self.k_buffer.numel() * self.k_buffer.element_size()


def _to_fp8(x: torch.Tensor, scale: float) -> torch.Tensor:
    return (x.to(torch.float32) / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def kv_slots_for_memory_fraction(
    shape: KVCacheShape, device: torch.device, mem_fraction: float, reserve_bytes: int = 0
) -> int:
    """Slots that fit when the process may use `mem_fraction` of the device's total memory
    (weights already loaded count against it; `reserve_bytes` is kept free for activations).

    On CUDA this reads the driver's free memory plus what torch's caching allocator holds but no
    tensor uses (a previous engine's freed cache in this process); on CPU, the machine's RAM.
    """
    if not 0.0 < mem_fraction <= 1.0:
        raise KVCacheCapacityError(f"mem_fraction must be in (0, 1], got {mem_fraction}")
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        budget = free - (1.0 - mem_fraction) * total - reserve_bytes
    else:
        import os

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        budget = min(free, mem_fraction * total) - reserve_bytes
    num_slots = shape.num_tokens_for_bytes(int(budget))
    if num_slots < 1:
        raise KVCacheCapacityError(
            f"mem_fraction={mem_fraction} leaves no room for a KV cache "
            f"({budget / 2**30:.2f} GiB available, {shape.bytes_per_token} bytes per token)"
        )
    return num_slots
