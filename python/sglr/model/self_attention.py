"""Self-attention over this rank's heads (all of them without tensor parallelism): fused q/k/v,
an optional norm over each query and key head (Qwen3, Gemma 3), rotary embeddings, the backend's
paged attention, the output projection.

A layer's sliding window, soft-cap and scale travel to the backend as its `AttentionVariant`
(from `config.family`), so the module itself never sees request boundaries or masks.
"""

from __future__ import annotations

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.model.config import ModelConfig
from sglr.model.layers import NORMS, Linear
from sglr.model.parallel import HeadSplit, TensorParallel, rank_and_size
from sglr.model.rope import apply_rope

CosSin = tuple[torch.Tensor, torch.Tensor]


class SelfAttention(torch.nn.Module):
    """Checkpoint names: `q/k/v_proj` (fused into `qkv_proj` at load time), `o_proj`, and with
    `qk_norm` (a `DecoderOptions.norm` kind) `q_norm` and `k_norm`: one weight per head
    dimension, shared by all heads, so every tensor-parallel rank holds all of it."""

    def __init__(
        self,
        config: ModelConfig,
        layer_id: int,
        dtype: torch.dtype,
        tp: TensorParallel | None,
        qk_norm: str | None = None,
    ) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.variant = config.family.attention_variant(layer_id, config.head_dim)
        split = HeadSplit.of(config.num_attention_heads, config.num_key_value_heads, *rank_and_size(tp))
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
        norm = None if qk_norm is None else NORMS[qk_norm]
        self.q_norm = None if norm is None else norm(d, config.rms_norm_eps, dtype)
        self.k_norm = None if norm is None else norm(d, config.rms_norm_eps, dtype)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        qkv = self.qkv_proj(hidden)  # [T, q + 2 kv]
        if self.q_norm is None or self.k_norm is None:
            qk, v = qkv.split((self.q_size + self.kv_size, self.kv_size), dim=-1)
            qk = qk.view(-1, self.num_heads + self.num_kv_heads, self.head_dim)
        else:
            q, k, v = qkv.split((self.q_size, self.kv_size, self.kv_size), dim=-1)
            q = self.q_norm(q.reshape(-1, self.num_heads, self.head_dim))
            k = self.k_norm(k.reshape(-1, self.num_kv_heads, self.head_dim))
            qk = torch.cat((q, k), dim=1)
        # q and k heads rotate together: one pass instead of two.
        qk = apply_rope(qk, cos_sin)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=1)  # [T, Hq, D], [T, Hkv, D]
        v = v.reshape(-1, self.num_kv_heads, self.head_dim)  # [T, Hkv, D], contiguous
        out = attn.forward(self.layer_id, q, k, v)  # [T, Hq, D]
        return self.o_proj(out.reshape(-1, self.q_size))
