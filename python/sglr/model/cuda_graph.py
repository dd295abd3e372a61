"""Decode CUDA graphs: one captured model step per common batch size, replayed with padding.

A decode step launches hundreds of small kernels; replaying a captured graph removes their
launch cost, which dominates at small batch sizes. Graphs are captured for a ladder of batch
sizes (1, 2, 4, 8, then every 16 up to the maximum) into one shared memory pool. A batch of size
n replays the smallest captured size >= n; the padding entries use request row 0 and KV slot 0,
which no request owns, with length 1, so they compute garbage that nobody reads.

Needs an attention backend whose decode has static shapes (`supports_cuda_graph`).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np
import torch

from sglr.model.forward_batch import ForwardBatch, ForwardMode
from sglr.model.kv_cache import PADDING_SLOT
from sglr.model.req_to_token import PADDING_ROW

if TYPE_CHECKING:
    from sglr.model.runner import ModelRunner


def default_batch_sizes(max_bs: int) -> list[int]:
    ladder = [1, 2, 4, 8, *range(16, max_bs + 1, 16)]
    return sorted({bs for bs in ladder if bs <= max_bs} | {max_bs})


class DecodeCudaGraphs:
    def __init__(self, runner: ModelRunner, batch_sizes: list[int] | tuple[int, ...] | None = None) -> None:
        self.runner = runner
        max_bs = min(runner.runner_config.cuda_graph_max_bs, runner.runner_config.max_num_reqs)
        self.batch_sizes = sorted(set(batch_sizes)) if batch_sizes else default_batch_sizes(max_bs)
        self.max_bs = self.batch_sizes[-1]
        device = runner.device
        self._input_ids = torch.zeros(self.max_bs, dtype=torch.int64, device=device)
        self._positions = torch.zeros(self.max_bs, dtype=torch.int64, device=device)
        self._out_slots = torch.full((self.max_bs,), PADDING_SLOT, dtype=torch.int64, device=device)
        self._req_rows = torch.full((self.max_bs,), PADDING_ROW, dtype=torch.int64, device=device)
        self._seq_lens = torch.ones(self.max_bs, dtype=torch.int64, device=device)
        self._ones = torch.ones(self.max_bs, dtype=torch.int64, device=device)
        self._starts = torch.arange(self.max_bs, dtype=torch.int64, device=device)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._logits: dict[int, torch.Tensor] = {}
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

    def _static_batch(self, bs: int) -> ForwardBatch:
        ones = np.ones(bs, dtype=np.int64)
        return ForwardBatch(
            mode=ForwardMode.DECODE,
            batch_size=bs,
            num_tokens=bs,
            input_ids=self._input_ids[:bs],
            positions=self._positions[:bs],
            out_cache_slots=self._out_slots[:bs],
            req_rows=self._req_rows[:bs],
            seq_lens=self._seq_lens[:bs],
            prefix_lens=self._positions[:bs],  # unused by graph-capable decode kernels
            extend_lens=self._ones[:bs],
            extend_starts=self._starts[:bs],
            seq_lens_cpu=ones,
            prefix_lens_cpu=ones - 1,
            extend_lens_cpu=ones,
            extend_starts_cpu=np.arange(bs, dtype=np.int64),
            req_rows_cpu=np.zeros(bs, dtype=np.int64),
            # The graph never writes the table: the runner does before each replay.
            table_rows=self._req_rows[:0],
            table_cols=self._positions[:0],
            table_slots=self._out_slots[:0],
            logprob_starts=(None,) * bs,
            top_logprobs_nums=(0,) * bs,
        )

    def _run_model(self, batch: ForwardBatch) -> torch.Tensor:
        runner = self.runner
        runner.attn.begin(batch)
        hidden = runner.model(batch.input_ids, batch.positions, runner.attn)
        return runner.model.compute_logits(hidden)

    @torch.inference_mode()
    def _capture_all(self) -> None:
        pool = None
        stream = torch.cuda.Stream()
        # Largest first, so smaller graphs fit into the memory the largest one reserved.
        for bs in reversed(self.batch_sizes):
            batch = self._static_batch(bs)
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # compile Triton kernels and warm the allocator outside capture
                    self._run_model(batch)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                self._logits[bs] = self._run_model(batch)
            pool = graph.pool()
            self._graphs[bs] = graph
        torch.cuda.synchronize()
