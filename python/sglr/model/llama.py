"""Llama 2 / Llama 3 decoder (GQA, Llama-3 RoPE scaling, optional tied embeddings and biases).

Tokens of all requests in a batch are flattened into one `[T]` stream; attention over each
request's paged KV is the `attn` backend's job, so the model itself never sees request
boundaries. q/k/v and gate/up projections are fused into one matmul each at load time.
The other dense families reuse these blocks: a layer's sliding window or soft-cap travels to the
backend as its `AttentionVariant` (from `config.family`), the MLP's activation is the config's.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F

from sglr.errors import ModelConfigError
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.model.config import ModelConfig
from sglr.model.layers import Linear, RMSNorm, VocabParallelEmbedding, load_named_weights
from sglr.model.parallel import HeadSplit, TensorParallel
from sglr.model.rope import RotaryEmbedding, apply_rope

CosSin = tuple[torch.Tensor, torch.Tensor]


class LlamaAttention(torch.nn.Module):
    """Self-attention over this rank's heads (all of them without tensor parallelism)."""

    def __init__(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.variant = config.family.attention_variant(layer_id, config.head_dim)
        split = HeadSplit.of(config.num_attention_heads, config.num_key_value_heads, *_rank_size(tp))
        self.num_heads, self.num_kv_heads = split.num_heads, split.num_kv_heads
        self.head_dim = d = config.head_dim
        self.q_size, self.kv_size = self.num_heads * d, self.num_kv_heads * d
        self.qkv_proj = Linear(
            config.hidden_size,
            (self.q_size, self.kv_size, self.kv_size),
            bias=config.attention_bias,
            dtype=dtype,
            shard_names=("q", "k", "v"),
            row_starts=(split.q_start * d, split.kv_start * d, split.kv_start * d) if tp else (),
        )
        self.o_proj = Linear(
            self.q_size,
            config.hidden_size,
            bias=False,
            dtype=dtype,
            col_start=split.q_start * d if tp else None,
            reduce=tp,
        )

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        qkv = self.qkv_proj(hidden)  # [T, q + 2 kv]
        qk, v = qkv.split((self.q_size + self.kv_size, self.kv_size), dim=-1)
        # q and k heads rotate together: one pass instead of two.
        qk = apply_rope(qk.view(-1, self.num_heads + self.num_kv_heads, self.head_dim), cos_sin)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=1)  # [T, Hq, D], [T, Hkv, D]
        v = v.reshape(-1, self.num_kv_heads, self.head_dim)  # [T, Hkv, D], contiguous
        out = attn.forward(self.layer_id, q, k, v)  # [T, Hq, D]
        return self.o_proj(out.reshape(-1, self.q_size))


class LlamaMLP(torch.nn.Module):
    def __init__(self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None) -> None:
        super().__init__()
        rank, num_ranks = _rank_size(tp)
        if config.intermediate_size % num_ranks:
            raise ModelConfigError(
                f"intermediate_size {config.intermediate_size} does not split over tp_size={num_ranks}"
            )
        size = config.intermediate_size // num_ranks
        self.act = _ACTIVATIONS[config.family.hidden_act]
        self.gate_up_proj = Linear(
            config.hidden_size,
            (size, size),
            bias=config.mlp_bias,
            dtype=dtype,
            shard_names=("gate", "up"),
            row_starts=(rank * size, rank * size) if tp else (),
        )
        self.down_proj = Linear(
            size,
            config.hidden_size,
            bias=config.mlp_bias,
            dtype=dtype,
            col_start=rank * size if tp else None,
            reduce=tp,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(self.act(gate) * up)


class LlamaDecoderLayer(torch.nn.Module):
    def __init__(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_id, dtype, tp)
        self.mlp = LlamaMLP(config, dtype, tp)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos_sin, attn)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class LlamaModel(torch.nn.Module):
    def __init__(self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        self.layers = torch.nn.ModuleList(
            LlamaDecoderLayer(config, i, dtype, tp) for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)


class LlamaForCausalLM(torch.nn.Module):
    """`forward` maps a flat token stream to final hidden states; `compute_logits` applies the head."""

    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config, dtype, tp)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        )
        self.rope = RotaryEmbedding(config, max_positions, dtype)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attn: AttentionBackend,
        input_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids, positions `[T]` -> normalized hidden states `[T, hidden]`. Writes this
        batch's K/V into the cache (through `attn`). `input_embeds` replaces the token
        embeddings (a multimodal model's, with image features in place)."""
        hidden = self.model.embed_tokens(input_ids) if input_embeds is None else input_embeds
        cos_sin = self.rope.lookup(positions)
        for layer in self.model.layers:
            hidden = layer(hidden, cos_sin, attn)
        return self.model.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`[N, hidden]` -> fp32 logits `[N, vocab]`."""
        head = self.model.embed_tokens if self.lm_head is None else self.lm_head
        return head.logits(hidden)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        ignored = ("lm_head.weight",) if self.config.tie_word_embeddings else ()
        load_named_weights(self, weights, ignored_names=ignored)

    def attention_variants(self) -> list[AttentionVariant]:
        """Each layer's attention, in layer order (what the attention backend is built with)."""
        return [layer.self_attn.variant for layer in self.model.layers]


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


_ACTIVATIONS = {"silu": F.silu, "gelu_pytorch_tanh": _gelu_tanh}


def _rank_size(tp: TensorParallel | None) -> tuple[int, int]:
    return (tp.rank, tp.size) if tp is not None else (0, 1)
