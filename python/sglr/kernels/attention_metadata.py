"""`AttentionMetadata`: what attention needs to know about one model step, and nothing more.

The kernels package owns this type so that it never imports the model package: the model's
`ForwardBatch` is an `AttentionMetadata` (it adds the token stream, the req-to-token writes and
the logprob requests), and the decode CUDA graphs build static ones over their own buffers.
Backends read the fields they need; none of them is copied or converted per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class AttentionMetadata:
    """Layout of one step's tokens: B requests, T new tokens in request-major order.

    Request b owns row `req_rows[b]` of the req-to-token table; its first `prefix_lens[b]` slots
    there are cached, the next `extend_lens[b]` are this step's tokens, found at
    `extend_starts[b]..` in the token stream. Device tensors are int64; the host mirrors size
    launches and padding without waiting on the device.
    """

    is_decode: bool  # exactly one new token per request
    batch_size: int
    out_cache_slots: torch.Tensor  # [T], where this step's K/V go
    req_rows: torch.Tensor  # [B]
    seq_lens: torch.Tensor  # [B], prefix + new tokens
    prefix_lens: torch.Tensor  # [B]
    extend_lens: torch.Tensor  # [B] (all ones in decode)
    extend_starts: torch.Tensor  # [B]
    seq_lens_cpu: np.ndarray
    prefix_lens_cpu: np.ndarray
    extend_lens_cpu: np.ndarray

    @property
    def max_seq_len(self) -> int:
        return int(self.seq_lens_cpu.max())

    @property
    def max_extend_len(self) -> int:
        return int(self.extend_lens_cpu.max())
