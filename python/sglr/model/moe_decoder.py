"""The decoder base of the mixture-of-experts families: expert-aware weight loading and the
choice, per layer, between the sparse MoE block and a dense MLP."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderForCausalLM
from sglr.model.llama import LlamaMLP
from sglr.model.moe import SparseMoeBlock, load_moe_weights
from sglr.model.parallel import TensorParallel


class MoEForCausalLM(DecoderForCausalLM):
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        load_moe_weights(self, weights, ignored_names=self.ignored_checkpoint_names())


def feed_forward(
    config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
) -> torch.nn.Module:
    """The MoE block on sparse layers, a dense MLP (of `intermediate_size`) on the others."""
    if config.moe is not None and config.moe.is_sparse_layer(layer_id):
        return SparseMoeBlock(config, dtype, tp)
    return LlamaMLP(config, dtype, tp)
