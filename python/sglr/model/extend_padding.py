"""Small extend batches padded to a fixed shape, as the extend CUDA graphs replay them.

A captured extend step has fixed sizes: `num_tokens` (a bucket: 16, 32, 64, ... up to the
configured maximum) and `num_req_slots` requests. A batch of `t <= num_tokens` tokens over
`r < num_req_slots` requests becomes: its own tokens and requests first, unchanged; one padding
request (request row 0, which no request owns, no cached prefix) owning the `num_tokens - t`
padding tokens (id 0, position 0, KV slot 0, which no request owns either); every further
request slot empty (no tokens at all, so the attention kernels skip it). Padding computes
garbage that only padding rows read: attention never mixes requests, every other layer is
per token. Logits are taken at each request's last token (index 0 for the empty ones).

Plain host arithmetic plus one copy per tensor, so the layout is tested on the CPU (a padded
batch gives the unpadded batch's logits on every backend that reads lengths per request).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.model.forward_batch import ForwardBatch
from sglr.model.kv_cache import PADDING_SLOT
from sglr.model.req_to_token import PADDING_ROW

SMALLEST_TOKEN_BUCKET = 16


def token_buckets(max_tokens: int) -> list[int]:
    """16, 32, 64, ... below `max_tokens`, then `max_tokens` itself (none when it is 0)."""
    buckets = []
    size = SMALLEST_TOKEN_BUCKET
    while size < max_tokens:
        buckets.append(size)
        size *= 2
    return [*buckets, max_tokens] if max_tokens > 0 else []


def bucket_for(buckets: list[int], num_tokens: int) -> int | None:
    """The smallest bucket holding `num_tokens`, or None when none does."""
    return next((b for b in buckets if b >= num_tokens), None)


@dataclass(frozen=True)
class PaddedRequests:
    """Per-request arrays `[num_req_slots]` of a padded batch (int64, host)."""

    req_rows: np.ndarray
    prefix_lens: np.ndarray
    extend_lens: np.ndarray
    extend_starts: np.ndarray
    last_token_ids: np.ndarray  # where each request's logits come from in the token stream

    @property
    def seq_lens(self) -> np.ndarray:
        return self.prefix_lens + self.extend_lens

    def stacked(self) -> np.ndarray:
        """`[6, num_req_slots]` in `REQUEST_FIELDS` order: one host-to-device copy for all."""
        return np.stack([getattr(self, name) for name in REQUEST_FIELDS])


REQUEST_FIELDS = ("req_rows", "prefix_lens", "extend_lens", "extend_starts", "last_token_ids", "seq_lens")


def pad_requests(
    req_rows: np.ndarray,
    prefix_lens: np.ndarray,
    extend_lens: np.ndarray,
    num_tokens: int,
    num_req_slots: int,
) -> PaddedRequests:
    """The padded layout of a batch of `len(req_rows) < num_req_slots` requests with
    `sum(extend_lens) <= num_tokens` tokens (see the module docstring)."""
    num_reqs, real_tokens = len(req_rows), int(np.sum(extend_lens))
    if num_reqs >= num_req_slots or real_tokens > num_tokens:
        raise ValueError(
            f"{num_reqs} requests / {real_tokens} tokens do not fit {num_req_slots - 1} requests / {num_tokens} tokens"
        )
    padding = num_req_slots - num_reqs
    rows = np.concatenate([req_rows, np.full(padding, PADDING_ROW)]).astype(np.int64)
    prefixes = np.concatenate([prefix_lens, np.zeros(padding)]).astype(np.int64)
    lens = np.concatenate([extend_lens, [num_tokens - real_tokens], np.zeros(padding - 1)]).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    last = np.where(lens > 0, starts + lens - 1, 0).astype(np.int64)
    return PaddedRequests(rows, prefixes, lens, starts, last)


@dataclass(frozen=True)
class PaddedExtend:
    """A batch padded to `num_tokens` tokens and `num_req_slots` requests, on the batch's device:
    what an extend graph's input buffers receive (and, run eagerly, what it computes)."""

    input_ids: torch.Tensor  # [num_tokens]
    positions: torch.Tensor
    out_cache_slots: torch.Tensor
    requests: torch.Tensor  # [6, num_req_slots], `PaddedRequests.stacked`
    host: PaddedRequests

    def metadata(self) -> AttentionMetadata:
        return padded_metadata(self.out_cache_slots, self.requests, self.host)

    @property
    def last_token_ids(self) -> torch.Tensor:
        return self.requests[REQUEST_FIELDS.index("last_token_ids")]


def padded_metadata(
    out_cache_slots: torch.Tensor, requests: torch.Tensor, host: PaddedRequests
) -> AttentionMetadata:
    """The attention metadata of a padded batch: device fields are views of the rows of
    `requests` (`[6, num_req_slots]`), host mirrors from `host`."""
    rows = dict(zip(REQUEST_FIELDS, requests, strict=True))
    return AttentionMetadata(
        is_decode=False,
        batch_size=requests.shape[1],
        out_cache_slots=out_cache_slots,
        req_rows=rows["req_rows"],
        seq_lens=rows["seq_lens"],
        prefix_lens=rows["prefix_lens"],
        extend_lens=rows["extend_lens"],
        extend_starts=rows["extend_starts"],
        seq_lens_cpu=host.seq_lens,
        prefix_lens_cpu=host.prefix_lens,
        extend_lens_cpu=host.extend_lens,
    )


def pad_extend(batch: ForwardBatch, num_tokens: int, num_req_slots: int) -> PaddedExtend:
    """`batch` (an extend batch) padded to `num_tokens` tokens and `num_req_slots` requests."""
    host = pad_requests(
        batch.req_rows_cpu, batch.prefix_lens_cpu, batch.extend_lens_cpu, num_tokens, num_req_slots
    )
    device = batch.input_ids.device
    pad = num_tokens - batch.num_tokens

    def padded(tokens: torch.Tensor, fill: int) -> torch.Tensor:
        return torch.cat([tokens, torch.full((pad,), fill, dtype=torch.int64, device=device)])

    return PaddedExtend(
        input_ids=padded(batch.input_ids, 0),
        positions=padded(batch.positions, 0),
        out_cache_slots=padded(batch.out_cache_slots, PADDING_SLOT),
        requests=torch.from_numpy(host.stacked()).to(device),
        host=host,
    )
