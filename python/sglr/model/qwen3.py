"""Qwen3: the Llama block with an RMSNorm over each query and key head before RoPE.

`head_dim` is its own config field (Qwen3 models often have `heads * head_dim != hidden`), and
q/k/v biases exist only when `attention_bias` says so. The q/k norms have one weight per head
dimension, shared by all heads, so every tensor-parallel rank holds all of it.
"""

from __future__ import annotations

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.model.config import ModelConfig
from sglr.model.decoder import CosSin, DecoderForCausalLM, DecoderLayer
from sglr.model.layers import RMSNorm
from sglr.model.llama import LlamaAttention, LlamaMLP
from sglr.model.parallel import TensorParallel
from sglr.model.rope import apply_rope


class Qwen3Attention(LlamaAttention):
    """Checkpoint names: `q/k/v/o_proj` as Llama's, plus `q_norm` and `k_norm`."""

    def __init__(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> None:
        super().__init__(config, layer_id, dtype, tp)
        self.q_norm = RMSNorm(config.head_dim, config.rms_norm_eps, dtype)
        self.k_norm = RMSNorm(config.head_dim, config.rms_norm_eps, dtype)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        q, k, v = self.qkv_proj(hidden).split((self.q_size, self.kv_size, self.kv_size), dim=-1)
        q = self.q_norm(q.reshape(-1, self.num_heads, self.head_dim))
        k = self.k_norm(k.reshape(-1, self.num_kv_heads, self.head_dim))
        # q and k heads rotate together: one pass instead of two.
        qk = apply_rope(torch.cat((q, k), dim=1), cos_sin)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=1)  # [T, Hq, D], [T, Hkv, D]
        v = v.reshape(-1, self.num_kv_heads, self.head_dim)
        out = attn.forward(self.layer_id, q, k, v)  # [T, Hq, D]
        return self.o_proj(out.reshape(-1, self.q_size))


class Qwen3ForCausalLM(DecoderForCausalLM):
    def make_layer(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> torch.nn.Module:
        return DecoderLayer(
            config, dtype, Qwen3Attention(config, layer_id, dtype, tp), LlamaMLP(config, dtype, tp)
        )
