"""`generate`: a minimal offline driver of `ModelRunner` for a fixed set of prompts.

Not the serving engine (no scheduler, no prefix cache, no streaming): it shows the runner
contract end to end and is what the model tests and CPU benchmark run. Prompts are prefilled
together (optionally in chunks of `prefill_chunk` tokens each step), then decoded together;
a request leaves the batch as soon as it has its tokens, freeing its KV slots and row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner
from sglr.model.sampler import sample
from sglr.model.sampling import SamplingBatch, SamplingConfig

_GREEDY = SamplingConfig(temperature=0.0)


class SlotAllocator(Protocol):
    def try_alloc(self, num_tokens: int) -> np.ndarray | None: ...
    def free(self, slots: np.ndarray) -> None: ...


@dataclass
class _Request:
    prompt: np.ndarray
    max_new_tokens: int
    config: SamplingConfig
    row: int
    # KV slots in token order, as the arrays they were allocated in (concatenated on demand).
    slot_chunks: list[np.ndarray] = field(default_factory=list)
    num_cached: int = 0
    output: list[int] = field(default_factory=list)

    def slots(self) -> np.ndarray:
        if len(self.slot_chunks) != 1:
            self.slot_chunks = [np.concatenate(self.slot_chunks or [np.zeros(0, np.int32)])]
        return self.slot_chunks[0]

    def add_slots(self, slots: np.ndarray) -> None:
        self.slot_chunks.append(slots)
        self.num_cached += slots.size

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens


def generate(
    runner: ModelRunner,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int | Sequence[int],
    configs: Sequence[SamplingConfig] | None = None,
    prefill_chunk: int | None = None,
    allocator: SlotAllocator | None = None,
) -> list[list[int]]:
    """Generates exactly `max_new_tokens[i]` tokens for prompt i (no stop tokens); returns them.

    Raises `MemoryError` when the KV pool or request table is too small for all prompts at once.
    """
    if allocator is None:
        from sglr.engine.kv_slots import KVSlotAllocator

        allocator = KVSlotAllocator(runner.num_kv_slots)
    lengths = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    configs = list(configs) if configs is not None else [_GREEDY] * len(prompts)
    requests = []
    for prompt, length, config in zip(prompts, lengths, configs, strict=True):
        row = runner.req_to_token.try_alloc()
        if row is None:
            raise MemoryError("more prompts than request-table rows")
        requests.append(_Request(np.asarray(prompt, dtype=np.int64), length, config, row))
    try:
        _prefill(runner, requests, prefill_chunk, allocator)
        active = [r for r in requests if not r.done]
        while active:
            _decode_step(runner, active, allocator)
            active = [r for r in active if not r.done]
    finally:
        for req in requests:
            allocator.free(req.slots())
            runner.req_to_token.free(req.row)
    return [r.output for r in requests]


def _alloc(allocator: SlotAllocator, num_tokens: int) -> np.ndarray:
    slots = allocator.try_alloc(num_tokens)
    if slots is None:
        raise MemoryError(f"KV pool cannot hold {num_tokens} more tokens")
    return slots


def _prefill(
    runner: ModelRunner, requests: list[_Request], chunk: int | None, allocator: SlotAllocator
) -> None:
    pending = [r for r in requests if r.max_new_tokens > 0 or r.prompt.size]
    while pending:
        extends, finishing = [], []
        for req in pending:
            end = req.prompt.size if chunk is None else min(req.prompt.size, req.num_cached + chunk)
            new_slots = _alloc(allocator, end - req.num_cached)
            extends.append(ExtendRequest(req.row, req.prompt[req.num_cached : end], req.slots(), new_slots))
            req.add_slots(new_slots)
            finishing.append(end == req.prompt.size)
        output = runner.forward(runner.extend_batch(extends))
        done = [i for i, f in enumerate(finishing) if f and not pending[i].done]
        if done:
            _sample_into(output.next_token_logits[done], [pending[i] for i in done], runner.device)
        pending = [r for r, f in zip(pending, finishing, strict=True) if not f]


def _decode_step(runner: ModelRunner, active: list[_Request], allocator: SlotAllocator) -> None:
    new_slots = _alloc(allocator, len(active))
    batch = runner.decode_batch(
        [r.row for r in active],
        [r.output[-1] for r in active],
        [r.num_cached + 1 for r in active],
        new_slots,
    )
    for i, req in enumerate(active):
        req.add_slots(new_slots[i : i + 1])
    output = runner.forward(batch)
    _sample_into(output.next_token_logits, active, runner.device)


def _sample_into(logits: torch.Tensor, requests: list[_Request], device: torch.device) -> None:
    sampling = SamplingBatch.build(
        [r.config for r in requests],
        logits.shape[1],
        device,
        output_ids=[r.output for r in requests] if any(r.config.has_penalty for r in requests) else None,
        steps=[len(r.output) for r in requests],
    )
    for req, token in zip(requests, sample(logits, sampling).token_ids_cpu.tolist(), strict=True):
        req.output.append(int(token))
