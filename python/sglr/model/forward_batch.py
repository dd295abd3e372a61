"""`ForwardBatch`: one model step over many requests, flattened into a token stream.

Two modes:
- EXTEND: each request brings `extend_len >= 1` new tokens on top of a cached prefix of any
  length (0 for a fresh prompt; a radix-cache hit; or the earlier chunks of a chunked prefill).
- DECODE: each request brings exactly one token.

The batch carries host (numpy) and device copies of the per-request lengths: kernels read the
device ones, launch sizes come from the host ones, so no step waits on a device-to-host copy.
A `ForwardBatch` is the `AttentionMetadata` its attention backend reads, so the runner hands it
over as is.
Build batches with `ForwardBatch.extend(...)` / `ForwardBatch.decode(...)`; both validate
their input and raise `BatchError` on anything inconsistent.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from sglr.errors import BatchError
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.model.batch_rows import BatchLimits, RowCopies, RowWrites
from sglr.model.image_input import ImageInput, ImageSpan, spans_at

IntArrayLike = Sequence[int] | np.ndarray


class ForwardMode(enum.Enum):
    EXTEND = "extend"
    DECODE = "decode"


@dataclass(frozen=True)
class ExtendRequest:
    """One request's part of an extend batch.

    row: its `ReqToTokenTable` row (1..max_num_reqs; the engine's `KVPool` hands them out).
    input_ids: the new tokens (positions `prefix_len .. prefix_len + extend_len - 1`).
    prefix_slots: KV slots of the tokens already cached (`prefix_len` of them, may be empty).
    new_slots: freshly allocated slots for `input_ids`, one each.
    logprob_start: if set, the runner also returns prompt logprobs: for every position
        `p >= logprob_start` of this chunk except the last, the logprob of the token at `p + 1`.
        Must be `>= prefix_len` (cached positions have no logits).
    top_logprobs_num: also return the top-k logprobs at those positions.
    images: the images of the request's prompt (all of them, wherever they stand; the batch
        takes the parts at the positions this extend computes).
    lora_id: the LoRA adapter its tokens run with (0: the base model; see `ModelRunner.load_lora`).
    embed: the runner also returns this chunk's pooled hidden states (`model/pooling.py`).
    """

    row: int
    input_ids: np.ndarray
    prefix_slots: np.ndarray
    new_slots: np.ndarray
    logprob_start: int | None = None
    top_logprobs_num: int = 0
    images: tuple[ImageInput, ...] = ()
    lora_id: int = 0
    embed: bool = False

    @property
    def prefix_len(self) -> int:
        return len(self.prefix_slots)

    @property
    def extend_len(self) -> int:
        return len(self.input_ids)

    @property
    def seq_len(self) -> int:
        return self.prefix_len + self.extend_len


@dataclass(frozen=True)
class ForwardBatch(AttentionMetadata):
    """A step's per-request layout (the `AttentionMetadata` the attention backend reads) plus
    the token stream, the req-to-token writes and the prompt-logprob requests."""

    num_tokens: int
    # Device tensors, [T] int64.
    input_ids: torch.Tensor
    positions: torch.Tensor
    # Host mirrors the attention backends do not need.
    extend_starts_cpu: np.ndarray
    req_rows_cpu: np.ndarray
    # Flattened (row, column, slot) writes into the req-to-token table, applied by the runner
    # before attention: an extend writes each request's whole row, a decode its new column plus
    # any `row_writes` (columns whose slots the engine switched to the prefix cache's).
    table_rows: torch.Tensor
    table_cols: torch.Tensor
    table_slots: torch.Tensor
    logprob_starts: tuple[int | None, ...] = ()
    top_logprobs_nums: tuple[int, ...] = ()
    # Image features to place in the token stream (extend batches of multimodal requests).
    image_spans: tuple[ImageSpan, ...] = ()
    # Row prefixes copied after the table writes (a decode batch that verifies drafts).
    row_copies: RowCopies | None = None
    # The LoRA adapter of each token of the stream (None: the base model for all).
    token_lora_ids: np.ndarray | None = None
    # Per request: whether it wants its chunk's pooled hidden states (embedding requests).
    embed_flags: tuple[bool, ...] = ()

    @property
    def uses_lora(self) -> bool:
        return self.token_lora_ids is not None

    @property
    def mode(self) -> ForwardMode:
        return ForwardMode.DECODE if self.is_decode else ForwardMode.EXTEND

    @property
    def wants_prompt_logprobs(self) -> bool:
        return any(start is not None for start in self.logprob_starts)

    @classmethod
    def extend(
        cls, requests: Sequence[ExtendRequest], device: torch.device | str, limits: BatchLimits | None = None
    ) -> ForwardBatch:
        if not requests:
            raise BatchError("an extend batch needs at least one request")
        for i, req in enumerate(requests):
            _check_extend_request(i, req)
        prefix_lens = np.array([r.prefix_len for r in requests], dtype=np.int64)
        extend_lens = np.array([r.extend_len for r in requests], dtype=np.int64)
        seq_lens = prefix_lens + extend_lens
        rows = np.array([r.row for r in requests], dtype=np.int64)
        layout = _HostLayout(
            input_ids=np.concatenate([np.asarray(r.input_ids, dtype=np.int64) for r in requests]),
            positions=np.concatenate([np.arange(p, s) for p, s in zip(prefix_lens, seq_lens, strict=True)]),
            out_cache_slots=np.concatenate([np.asarray(r.new_slots, dtype=np.int64) for r in requests]),
            req_rows=rows,
            seq_lens=seq_lens,
            prefix_lens=prefix_lens,
            extend_lens=extend_lens,
            extend_starts=np.concatenate(([0], np.cumsum(extend_lens)[:-1])),
            table_rows=np.repeat(rows, seq_lens),
            table_cols=np.concatenate([np.arange(s) for s in seq_lens]),
            table_slots=np.concatenate(
                [np.concatenate((r.prefix_slots, r.new_slots)).astype(np.int64) for r in requests]
            ),
        )
        if limits is not None:
            limits.check(layout.input_ids, layout.table_slots, rows, seq_lens)
        spans = [
            span
            for r, start in zip(requests, layout.extend_starts.tolist(), strict=True)
            if r.images
            for span in spans_at(r.images, r.prefix_len, r.seq_len, start)
        ]
        batch = cls._build(
            layout,
            device,
            is_decode=False,
            logprob_starts=tuple(r.logprob_start for r in requests),
            top_logprobs_nums=tuple(r.top_logprobs_num for r in requests),
            image_spans=tuple(spans),
            token_lora_ids=_token_lora_ids([r.lora_id for r in requests], extend_lens),
        )
        if not any(r.embed for r in requests):
            return batch
        return dataclasses.replace(batch, embed_flags=tuple(r.embed for r in requests))

    @classmethod
    def decode(
        cls,
        req_rows: IntArrayLike,
        input_ids: IntArrayLike,
        seq_lens: IntArrayLike,
        out_cache_slots: IntArrayLike,
        device: torch.device | str,
        limits: BatchLimits | None = None,
        row_writes: RowWrites | None = None,
        row_copies: RowCopies | None = None,
        lora_ids: IntArrayLike | None = None,
    ) -> ForwardBatch:
        """One token per request. `seq_lens[i]` counts request i's tokens *including* this one,
        so the token sits at position `seq_lens[i] - 1`; its K/V go to `out_cache_slots[i]`.
        `row_writes`: extra req-to-token entries to set in the same step (rows of this batch);
        `row_copies`: row prefixes copied after all writes (rows of this batch). A row is a query:
        several rows may hold one request's tokens (a verify pass's draft tree), each attending to
        the slots its own row names. `lora_ids`: each row's LoRA adapter (None: the base)."""
        rows = np.asarray(req_rows, dtype=np.int64)
        ids = np.asarray(input_ids, dtype=np.int64)
        lens = np.asarray(seq_lens, dtype=np.int64)
        slots = np.asarray(out_cache_slots, dtype=np.int64)
        batch_size = rows.size
        if batch_size == 0:
            raise BatchError("a decode batch needs at least one request")
        if not ids.size == lens.size == slots.size == batch_size:
            raise BatchError(
                f"decode batch arrays differ in length: rows {rows.size}, ids {ids.size}, "
                f"seq_lens {lens.size}, slots {slots.size}"
            )
        if lens.min() < 1:
            raise BatchError("decode seq_lens must be >= 1 (they include the new token)")
        if limits is not None:
            limits.check(ids, slots, rows, lens)
        table_rows, table_cols, table_slots = rows, lens - 1, slots
        if row_writes is not None and row_writes.rows.size:
            row_writes.check(rows, lens, limits)
            table_rows = np.concatenate((row_writes.rows, rows))
            table_cols = np.concatenate((row_writes.cols, lens - 1))
            table_slots = np.concatenate((row_writes.slots, slots))
        if row_copies is not None:
            row_copies.check(rows, lens)
        ones = np.ones(batch_size, dtype=np.int64)
        starts = np.arange(batch_size, dtype=np.int64)
        layout = _HostLayout(
            ids, lens - 1, slots, rows, lens, lens - 1, ones, starts, table_rows, table_cols, table_slots
        )
        return cls._build(
            layout,
            device,
            is_decode=True,
            logprob_starts=(None,) * batch_size,
            top_logprobs_nums=(0,) * batch_size,
            row_copies=row_copies,
            token_lora_ids=None if lora_ids is None else _token_lora_ids(lora_ids, ones),
        )

    @classmethod
    def _build(
        cls,
        host: _HostLayout,
        device: torch.device | str,
        *,
        is_decode: bool,
        logprob_starts: tuple[int | None, ...],
        top_logprobs_nums: tuple[int, ...],
        image_spans: tuple[ImageSpan, ...] = (),
        row_copies: RowCopies | None = None,
        token_lora_ids: np.ndarray | None = None,
    ) -> ForwardBatch:
        # The device tensors are named like the layout's arrays.
        device_arrays = dict(zip(host._fields, _to_device(list(host), device), strict=True))
        return cls(
            is_decode=is_decode,
            batch_size=host.req_rows.size,
            num_tokens=host.input_ids.size,
            seq_lens_cpu=host.seq_lens,
            prefix_lens_cpu=host.prefix_lens,
            extend_lens_cpu=host.extend_lens,
            extend_starts_cpu=host.extend_starts,
            req_rows_cpu=host.req_rows,
            logprob_starts=logprob_starts,
            top_logprobs_nums=top_logprobs_nums,
            image_spans=image_spans,
            row_copies=row_copies,
            token_lora_ids=token_lora_ids,
            **device_arrays,
        )


class _HostLayout(NamedTuple):
    """A batch's int64 index arrays, named like its device tensors; copied in one transfer."""

    input_ids: np.ndarray
    positions: np.ndarray
    out_cache_slots: np.ndarray
    req_rows: np.ndarray
    seq_lens: np.ndarray
    prefix_lens: np.ndarray
    extend_lens: np.ndarray
    extend_starts: np.ndarray
    table_rows: np.ndarray
    table_cols: np.ndarray
    table_slots: np.ndarray


def _check_extend_request(index: int, req: ExtendRequest) -> None:
    if req.extend_len < 1:
        raise BatchError(f"request {index}: an extend needs at least one new token")
    if len(req.new_slots) != req.extend_len:
        raise BatchError(f"request {index}: {len(req.new_slots)} new slots for {req.extend_len} new tokens")
    if req.logprob_start is not None and not req.prefix_len <= req.logprob_start <= req.seq_len:
        raise BatchError(
            f"request {index}: logprob_start {req.logprob_start} outside the computed positions "
            f"{req.prefix_len}..{req.seq_len} (cached positions have no logits)"
        )
    if req.top_logprobs_num < 0:
        raise BatchError(f"request {index}: top_logprobs_num must be >= 0")
    for image in req.images:
        if image.offset < 0 or image.num_tokens < 1:
            raise BatchError(f"request {index}: an image at positions {image.offset}..{image.end - 1}")


def _token_lora_ids(lora_ids: IntArrayLike, num_tokens: np.ndarray) -> np.ndarray | None:
    """Each request's adapter repeated over its tokens; None when all run the base model."""
    ids = np.asarray(lora_ids, dtype=np.int64)
    if ids.size != num_tokens.size:
        raise BatchError(f"{ids.size} LoRA ids for {num_tokens.size} requests")
    if ids.size and ids.min() < 0:
        raise BatchError("a LoRA adapter id is negative")
    return None if not ids.any() else np.repeat(ids, num_tokens)


def _to_device(arrays: list[np.ndarray], device: torch.device | str) -> list[torch.Tensor]:
    """One host-to-device copy for all small index arrays (int64), split on the device."""
    sizes = [a.size for a in arrays]
    packed = torch.from_numpy(np.concatenate([a.astype(np.int64, copy=False).ravel() for a in arrays]))
    device = torch.device(device)
    # Pinned memory makes the copy asynchronous on CUDA.
    packed = packed.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else packed.to(device)
    return list(packed.split(sizes))
