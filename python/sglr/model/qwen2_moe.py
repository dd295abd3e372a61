"""Qwen2-MoE: Qwen2 attention (q/k/v biases unless `qkv_bias` is false) and, on sparse layers, a
MoE block with a shared expert behind a sigmoid gate; `decoder_sparse_step` and
`mlp_only_layers` leave some layers with a dense MLP (of `intermediate_size`)."""

from __future__ import annotations

import torch

from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderLayer
from sglr.model.llama import LlamaAttention
from sglr.model.moe_decoder import MoEForCausalLM, feed_forward
from sglr.model.parallel import TensorParallel


class Qwen2MoeForCausalLM(MoEForCausalLM):
    def make_layer(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> torch.nn.Module:
        return DecoderLayer(
            config,
            dtype,
            LlamaAttention(config, layer_id, dtype, tp),
            feed_forward(config, layer_id, dtype, tp),
        )
