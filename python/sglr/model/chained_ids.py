"""`ChainedIds`: decode-step input ids taken from the previous step's sampled ids on the device,
so a step is queued before the host has read the tokens it feeds (the overlap schedule)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sglr.errors import BatchError


@dataclass(frozen=True)
class ChainedIds:
    """Row `dst_rows[i]` of the batch is fed `sampled_ids[src_rows[i]]` (`sampled_ids` on the
    batch's device); the host array holds a placeholder there."""

    sampled_ids: torch.Tensor
    src_rows: np.ndarray
    dst_rows: np.ndarray

    def write_into(self, input_ids: torch.Tensor) -> None:
        if self.src_rows.size != self.dst_rows.size:
            raise BatchError(f"chained ids: {self.src_rows.size} sources for {self.dst_rows.size} rows")
        if self.sampled_ids.device != input_ids.device:
            raise BatchError(f"chained ids on {self.sampled_ids.device}, the batch on {input_ids.device}")
        device = input_ids.device
        src = torch.from_numpy(self.src_rows).to(device, non_blocking=True)
        dst = torch.from_numpy(self.dst_rows).to(device, non_blocking=True)
        input_ids[dst] = self.sampled_ids[src].to(input_ids.dtype)
