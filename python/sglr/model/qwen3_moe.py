"""Qwen3-MoE: Qwen3 attention (per-head q/k norms, no biases by default) and MoE blocks without a
shared expert; `norm_topk_prob` says whether the top-k weights are renormalized, and
`decoder_sparse_step` / `mlp_only_layers` leave some layers dense."""

from __future__ import annotations

import torch

from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderLayer
from sglr.model.moe_decoder import MoEForCausalLM, feed_forward
from sglr.model.parallel import TensorParallel
from sglr.model.qwen3 import Qwen3Attention


class Qwen3MoeForCausalLM(MoEForCausalLM):
    def make_layer(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> torch.nn.Module:
        return DecoderLayer(
            config,
            dtype,
            Qwen3Attention(config, layer_id, dtype, tp),
            feed_forward(config, layer_id, dtype, tp),
        )
