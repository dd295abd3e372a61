"""Which CUDA graphs a `ModelRunner` captures, and the model steps they capture.

Decode graphs (`cuda_graph.py`) when `cuda_graph_max_bs > 0` and the attention backend's decode
has static shapes; extend graphs (`cuda_graph_extend.py`) when `cuda_graph_extend_max_tokens > 0`
and its extend reads lengths from device memory (`supports_cuda_graph_extend`), sharing the
decode graphs' memory pool. Neither under tensor parallelism (collectives inside) nor off CUDA.
"""

from __future__ import annotations

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.model.cuda_graph import DecodeCudaGraphs
from sglr.model.cuda_graph_extend import ExtendCudaGraphs
from sglr.model.runner_config import RunnerConfig


class ModelSteps:
    """The model's forward as the graphs capture it, over the runner's model and backend."""

    def __init__(self, model: torch.nn.Module, attn: AttentionBackend) -> None:
        self.model = model
        self.attn = attn

    def logits_of_every_token(
        self, input_ids: torch.Tensor, positions: torch.Tensor, metadata: AttentionMetadata
    ) -> torch.Tensor:
        """A decode step (one token per request)."""
        self.attn.begin(metadata)
        return self.model.compute_logits(self.model(input_ids, positions, self.attn))

    def logits_at(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        metadata: AttentionMetadata,
        last_token_ids: torch.Tensor,
    ) -> torch.Tensor:
        """An extend step: logits at the tokens `last_token_ids` (each request's last)."""
        self.attn.begin(metadata)
        hidden = self.model(input_ids, positions, self.attn)
        return self.model.compute_logits(hidden[last_token_ids])


def capture_graphs(
    config: RunnerConfig, steps: ModelSteps, device: torch.device, tensor_parallel: bool
) -> tuple[DecodeCudaGraphs | None, ExtendCudaGraphs | None]:
    """The runner's (decode graphs, extend graphs), each None where it does not apply."""
    if device.type != "cuda" or tensor_parallel:
        return None, None
    decode = None
    if config.cuda_graph_max_bs > 0 and steps.attn.supports_cuda_graph:
        max_bs = min(config.cuda_graph_max_bs, config.max_num_reqs)
        decode = DecodeCudaGraphs(
            steps.logits_of_every_token, device, max_bs, config.cuda_graph_batch_sizes or None
        )
    extend = None
    if config.cuda_graph_extend_max_tokens > 0 and steps.attn.supports_cuda_graph_extend:
        max_reqs = min(config.cuda_graph_extend_max_reqs, config.max_num_reqs)
        pool = decode.pool if decode is not None else None
        extend = ExtendCudaGraphs(
            steps.logits_at, device, config.cuda_graph_extend_max_tokens, max_reqs, pool
        )
    return decode, extend
