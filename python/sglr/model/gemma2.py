"""Gemma 2 decoder (and the base of Gemma 3).

Differences from Llama, all from `config.family` or the checkpoint layout:
- token embeddings are multiplied by sqrt(hidden_size), rounded to the model dtype first;
- RMSNorm weights are stored as offsets from 1 (`x_hat * (1 + w)`, computed in fp32);
- "sandwich" norms: each block's output is normalized again before joining the residual;
- a GeLU-tanh gated MLP, attention scaled by `query_pre_attn_scalar ** -0.5`, attention scores
  and final logits soft-capped, local (sliding-window) and global layers alternating (each
  layer's `AttentionVariant` carries its window and cap to the backend);
- Gemma 3 adds RMSNorm on each query and key head and a separate RoPE base for local layers
  (`Gemma3ForCausalLM` sets `qk_norm`; the local RoPE table exists when the config has one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.model.config import ModelConfig, RopeScaling
from sglr.model.layers import VocabParallelEmbedding, load_named_weights
from sglr.model.llama import CosSin, LlamaAttention, LlamaMLP
from sglr.model.parallel import TensorParallel
from sglr.model.rope import RotaryEmbedding, apply_rope


class GemmaRMSNorm(torch.nn.Module):
    """RMSNorm whose weight is an offset from 1; normalized and scaled in fp32, then cast back."""

    def __init__(self, size: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.zeros(size, dtype=dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


class GemmaAttention(LlamaAttention):
    """Llama attention, optionally with RMSNorm over each query and key head before RoPE."""

    def __init__(
        self,
        config: ModelConfig,
        layer_id: int,
        dtype: torch.dtype,
        tp: TensorParallel | None,
        qk_norm: bool,
    ) -> None:
        super().__init__(config, layer_id, dtype, tp)
        self.q_norm = GemmaRMSNorm(config.head_dim, config.rms_norm_eps, dtype) if qk_norm else None
        self.k_norm = GemmaRMSNorm(config.head_dim, config.rms_norm_eps, dtype) if qk_norm else None

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        if self.q_norm is None or self.k_norm is None:
            return super().forward(hidden, cos_sin, attn)
        q, k, v = self.qkv_proj(hidden).split((self.q_size, self.kv_size, self.kv_size), dim=-1)
        q = self.q_norm(q.reshape(-1, self.num_heads, self.head_dim))
        k = self.k_norm(k.reshape(-1, self.num_kv_heads, self.head_dim))
        qk = apply_rope(torch.cat((q, k), dim=1), cos_sin)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=1)
        v = v.reshape(-1, self.num_kv_heads, self.head_dim)
        out = attn.forward(self.layer_id, q, k, v)
        return self.o_proj(out.reshape(-1, self.q_size))


class GemmaDecoderLayer(torch.nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        layer_id: int,
        dtype: torch.dtype,
        tp: TensorParallel | None,
        qk_norm: bool,
    ) -> None:
        super().__init__()
        self.is_local = config.family.layer_window(layer_id) is not None
        self.self_attn = GemmaAttention(config, layer_id, dtype, tp, qk_norm)
        self.mlp = LlamaMLP(config, dtype, tp)
        size, eps = config.hidden_size, config.rms_norm_eps
        self.input_layernorm = GemmaRMSNorm(size, eps, dtype)
        self.post_attention_layernorm = GemmaRMSNorm(size, eps, dtype)
        self.pre_feedforward_layernorm = GemmaRMSNorm(size, eps, dtype)
        self.post_feedforward_layernorm = GemmaRMSNorm(size, eps, dtype)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        attended = self.self_attn(self.input_layernorm(hidden), cos_sin, attn)
        hidden = hidden + self.post_attention_layernorm(attended)
        mixed = self.mlp(self.pre_feedforward_layernorm(hidden))
        return hidden + self.post_feedforward_layernorm(mixed)


class GemmaModel(torch.nn.Module):
    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None, qk_norm: bool
    ) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        self.layers = torch.nn.ModuleList(
            GemmaDecoderLayer(config, i, dtype, tp, qk_norm) for i in range(config.num_hidden_layers)
        )
        self.norm = GemmaRMSNorm(config.hidden_size, config.rms_norm_eps, dtype)


class Gemma2ForCausalLM(torch.nn.Module):
    """Same interface as `LlamaForCausalLM`: `forward`, `compute_logits`, `load_weights`,
    `attention_variants`."""

    qk_norm = False

    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.model = GemmaModel(config, dtype, tp, self.qk_norm)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        )
        self.rope = RotaryEmbedding(config, max_positions, dtype)
        local_theta = config.family.rope_local_theta
        self.local_rope = (
            None
            if local_theta is None
            else RotaryEmbedding(
                dataclasses.replace(config, rope_theta=local_theta, rope_scaling=RopeScaling()),
                max_positions,
                dtype,
            )
        )
        self.embed_scale = config.hidden_size**0.5

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionBackend
    ) -> torch.Tensor:
        hidden = self.model.embed_tokens(input_ids)
        # transformers rounds the scale to the model dtype before multiplying.
        hidden = hidden * torch.tensor(self.embed_scale, dtype=hidden.dtype)
        global_cos_sin = self.rope.lookup(positions)
        local_cos_sin = global_cos_sin if self.local_rope is None else self.local_rope.lookup(positions)
        for layer in self.model.layers:
            hidden = layer(hidden, local_cos_sin if layer.is_local else global_cos_sin, attn)
        return self.model.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        head = self.model.embed_tokens if self.lm_head is None else self.lm_head
        logits = head.logits(hidden)
        cap = self.config.family.final_logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        ignored = ("lm_head.weight",) if self.config.tie_word_embeddings else ()
        load_named_weights(self, weights, ignored_names=ignored)

    def attention_variants(self) -> list[AttentionVariant]:
        return [layer.self_attn.variant for layer in self.model.layers]
