"""Extend CUDA graphs: small extend batches (jump-forward runs, chunk tails, short prompts) replayed
from a graph captured per token bucket, padded as `extend_padding` lays them out.

A small extend step is launch-bound like a decode step: hundreds of kernels over a few dozen
tokens. Graphs are captured for token buckets 16, 32, 64, ... up to `max_tokens`, each with room
for `max_reqs` requests plus the padding request, into one memory pool (the decode graphs' when
given). A batch of t tokens replays the smallest bucket >= t.

Needs an attention backend whose extend reads every length from device memory and sizes its
launch from host maxima only (`supports_cuda_graph_extend`: the Triton backend; the captured
launch covers the bucket's worth of queries per request, empty requests exit at once). Batches
that need per-request host work the graph cannot repeat (prompt logprobs, pooled hidden states,
images, LoRA adapters) run eagerly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.model.extend_padding import (
    REQUEST_FIELDS,
    PaddedRequests,
    bucket_for,
    pad_extend,
    pad_requests,
    padded_metadata,
    token_buckets,
)
from sglr.model.forward_batch import ForwardBatch
from sglr.model.kv_cache import PADDING_SLOT

# (input_ids [T], positions [T], attention metadata, last_token_ids [R]) -> logits [R, V]: one
# extend step that begins the attention backend on the metadata and runs the model.
ExtendStep = Callable[[torch.Tensor, torch.Tensor, AttentionMetadata, torch.Tensor], torch.Tensor]


def can_graph_extend(batch: ForwardBatch, max_tokens: int, max_reqs: int) -> bool:
    """Whether an extend graph of `max_tokens` tokens and `max_reqs` requests can run `batch`."""
    return (
        not batch.is_decode
        and batch.num_tokens <= max_tokens
        and batch.batch_size <= max_reqs
        and not batch.wants_prompt_logprobs
        and not batch.embed_flags
        and not batch.image_spans
        and not batch.uses_lora
    )


class ExtendCudaGraphs:
    def __init__(
        self,
        extend_step: ExtendStep,
        device: torch.device,
        max_tokens: int,
        max_reqs: int,
        pool: tuple[int, int] | None = None,
    ) -> None:
        """Captures `extend_step` for every token bucket up to `max_tokens`, each for up to
        `max_reqs` requests; `pool`: a graph memory pool to share (the decode graphs')."""
        self._extend_step = extend_step
        self.token_buckets = token_buckets(max_tokens)
        self.max_tokens = self.token_buckets[-1]
        self.max_reqs = max_reqs
        self.num_req_slots = max_reqs + 1  # the padding request's slot
        self._input_ids = torch.zeros(self.max_tokens, dtype=torch.int64, device=device)
        self._positions = torch.zeros(self.max_tokens, dtype=torch.int64, device=device)
        self._out_slots = torch.full((self.max_tokens,), PADDING_SLOT, dtype=torch.int64, device=device)
        self._requests = torch.zeros(
            (len(REQUEST_FIELDS), self.num_req_slots), dtype=torch.int64, device=device
        )
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._logits: dict[int, torch.Tensor] = {}
        self.pool = pool
        self._capture_all()

    def can_run(self, batch: ForwardBatch) -> bool:
        return can_graph_extend(batch, self.max_tokens, self.max_reqs)

    def replay(self, batch: ForwardBatch) -> torch.Tensor:
        """Logits `[B, V]` at each request's last token (its table writes already done)."""
        bucket = bucket_for(self.token_buckets, batch.num_tokens)
        assert bucket is not None and self.can_run(batch)
        padded = pad_extend(batch, bucket, self.num_req_slots)
        self._input_ids[:bucket].copy_(padded.input_ids)
        self._positions[:bucket].copy_(padded.positions)
        self._out_slots[:bucket].copy_(padded.out_cache_slots)
        self._requests.copy_(padded.requests)
        self._graphs[bucket].replay()
        return self._logits[bucket][: batch.batch_size]

    def _run_model(self, bucket: int, host: PaddedRequests) -> torch.Tensor:
        metadata = padded_metadata(self._out_slots[:bucket], self._requests, host)
        last_token_ids = self._requests[REQUEST_FIELDS.index("last_token_ids")]
        return self._extend_step(self._input_ids[:bucket], self._positions[:bucket], metadata, last_token_ids)

    @torch.inference_mode()
    def _capture_all(self) -> None:
        stream = torch.cuda.Stream()
        # Largest first, so smaller graphs fit into the memory the largest one reserved.
        for bucket in reversed(self.token_buckets):
            # An all-padding batch to warm up on; its host mirrors size the launch for `bucket`
            # queries per request, which every batch of this bucket fits.
            empty = np.zeros(0, dtype=np.int64)
            host = pad_requests(empty, empty, empty, bucket, self.num_req_slots)
            self._requests.copy_(torch.from_numpy(host.stacked()))
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # compile Triton kernels and warm the allocator outside capture
                    self._run_model(bucket, host)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool, stream=stream):
                self._logits[bucket] = self._run_model(bucket, host)
            self.pool = graph.pool()
            self._graphs[bucket] = graph
        torch.cuda.synchronize()
