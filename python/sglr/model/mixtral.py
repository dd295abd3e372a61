"""Mixtral: Llama attention (GQA, no biases) and a sparse MoE block in place of every MLP.

Checkpoint names: `block_sparse_moe.gate` (router), `block_sparse_moe.experts.N.w1/w3/w2`
(gate/up/down). The top-k weights are always renormalized. A sliding window (every layer) reaches the
attention backend through `config.family`, as Mistral's.
"""

from __future__ import annotations

import torch

from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderLayer
from sglr.model.llama import LlamaAttention
from sglr.model.moe import SparseMoeBlock
from sglr.model.moe_decoder import MoEForCausalLM
from sglr.model.parallel import TensorParallel


class MixtralForCausalLM(MoEForCausalLM):
    def make_layer(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> torch.nn.Module:
        return DecoderLayer(
            config,
            dtype,
            LlamaAttention(config, layer_id, dtype, tp),
            SparseMoeBlock(config, dtype, tp),
            ffn_name="block_sparse_moe",
        )
