"""Decode CUDA graphs: one captured model step per common batch size, replayed with padding.

A decode step launches hundreds of small kernels; replaying a captured graph removes their
launch cost, which dominates at small batch sizes. Graphs are captured for a ladder of batch
sizes (1, 2, 4, 8, then every 16 up to the maximum) into one shared memory pool. A batch of size
n replays the smallest captured size >= n; the padding entries use request row 0 and KV slot 0,
which no request owns, with length 1, so they compute garbage that nobody reads.

Needs an attention backend whose decode has static shapes (`supports_cuda_graph`). The graphs
capture a `DecodeStep` over their own input buffers, so they know nothing of the runner.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np
import torch

from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.model.forward_batch import ForwardBatch
from sglr.model.kv_cache import PADDING_SLOT
from sglr.model.req_to_token import PADDING_ROW

# (input_ids [B], positions [B], attention metadata) -> logits [B, V]: one decode step, which
# begins the attention backend on the metadata and runs the model.
DecodeStep = Callable[[torch.Tensor, torch.Tensor, AttentionMetadata], torch.Tensor]


def default_batch_sizes(max_bs: int) -> list[int]:
    ladder = [1, 2, 4, 8, *range(16, max_bs + 1, 16)]
    return sorted({bs for bs in ladder if bs <= max_bs} | {max_bs})


class DecodeCudaGraphs:
    def __init__(
        self,
        decode_step: DecodeStep,
        device: torch.device,
        max_bs: int,
        batch_sizes: Sequence[int] | None = None,
    ) -> None:
        """Captures `decode_step` for `batch_sizes` (default: a ladder up to `max_bs`)."""
        self._decode_step = decode_step
        self.batch_sizes = sorted(set(batch_sizes)) if batch_sizes else default_batch_sizes(max_bs)
        self.max_bs = self.batch_sizes[-1]
        self._input_ids = torch.zeros(self.max_bs, dtype=torch.int64, device=device)
        self._positions = torch.zeros(self.max_bs, dtype=torch.int64, device=device)
        self._out_slots = torch.full((self.max_bs,), PADDING_SLOT, dtype=torch.int64, device=device)
        self._req_rows = torch.full((self.max_bs,), PADDING_ROW, dtype=torch.int64, device=device)
        self._seq_lens = torch.ones(self.max_bs, dtype=torch.int64, device=device)
        self._ones = torch.ones(self.max_bs, dtype=torch.int64, device=device)
        self._starts = torch.arange(self.max_bs, dtype=torch.int64, device=device)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._logits: dict[int, torch.Tensor] = {}
        self.pool: tuple[int, int] | None = None  # the graphs' memory pool, for others to share
        self._capture_all()

    def can_run(self, batch_size: int) -> bool:
        return batch_size <= self.max_bs

    def replay(self, batch: ForwardBatch) -> torch.Tensor:
        """Logits `[B, V]` for a decode batch (its table writes already done by the runner)."""
        raw_bs = batch.batch_size
        bs = self.batch_sizes[bisect.bisect_left(self.batch_sizes, raw_bs)]
        if bs != raw_bs:
            self._reset_padding(raw_bs, bs)
        self._input_ids[:raw_bs].copy_(batch.input_ids)
        self._positions[:raw_bs].copy_(batch.positions)
        self._out_slots[:raw_bs].copy_(batch.out_cache_slots)
        self._req_rows[:raw_bs].copy_(batch.req_rows)
        self._seq_lens[:raw_bs].copy_(batch.seq_lens)
        self._graphs[bs].replay()
        return self._logits[bs][:raw_bs]

    def _reset_padding(self, start: int, end: int) -> None:
        self._input_ids[start:end].zero_()
        self._positions[start:end].zero_()
        self._out_slots[start:end].fill_(PADDING_SLOT)
        self._req_rows[start:end].fill_(PADDING_ROW)
        self._seq_lens[start:end].fill_(1)

    def _static_metadata(self, bs: int) -> AttentionMetadata:
        ones = np.ones(bs, dtype=np.int64)
        return AttentionMetadata(
            is_decode=True,
            batch_size=bs,
            out_cache_slots=self._out_slots[:bs],
            req_rows=self._req_rows[:bs],
            seq_lens=self._seq_lens[:bs],
            prefix_lens=self._positions[:bs],  # unused by graph-capable decode kernels
            extend_lens=self._ones[:bs],
            extend_starts=self._starts[:bs],
            seq_lens_cpu=ones,
            prefix_lens_cpu=ones - 1,
            extend_lens_cpu=ones,
        )

    def _run_model(self, bs: int, metadata: AttentionMetadata) -> torch.Tensor:
        return self._decode_step(self._input_ids[:bs], self._positions[:bs], metadata)

    @torch.inference_mode()
    def _capture_all(self) -> None:
        pool = None
        stream = torch.cuda.Stream()
        # Largest first, so smaller graphs fit into the memory the largest one reserved.
        for bs in reversed(self.batch_sizes):
            metadata = self._static_metadata(bs)
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # compile Triton kernels and warm the allocator outside capture
                    self._run_model(bs, metadata)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                self._logits[bs] = self._run_model(bs, metadata)
            pool = graph.pool()
            self._graphs[bs] = graph
        self.pool = pool
        torch.cuda.synchronize()
