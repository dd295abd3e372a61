"""`PagedKVPool`: the K/V memory attention backends read and write, as kernels see it.

A structural protocol, so the model's `KVCache` satisfies it without the kernels importing it.
Slots are rows (page size 1); slot 0 is a padding row that no request owns.
"""

from __future__ import annotations

from typing import Protocol

import torch


class PagedKVPool(Protocol):
    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def k_cache(self, layer_id: int) -> torch.Tensor:
        """Layer `layer_id`'s keys, a contiguous `[num_slots + 1, Hkv, D]` tensor."""
        ...

    def v_cache(self, layer_id: int) -> torch.Tensor:
        """Layer `layer_id`'s values, laid out like `k_cache`."""
        ...

    def scales(self, layer_id: int) -> tuple[float, float]:
        """(k_scale, v_scale) the stored values multiply by (1.0 unless the pool is fp8)."""
        ...

    def store(self, layer_id: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Writes `k`, `v` `[T, Hkv, D]` into rows `slots` `[T]` (int64) of layer `layer_id`."""
        ...
