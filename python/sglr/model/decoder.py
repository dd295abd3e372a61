"""The decoder-only language model every family builds on, from the options its declaration
gives (`DecoderOptions`): pre-norm layers of self-attention and a feed-forward module (a gated
MLP or a mixture-of-experts block), the final norm and the head.

Tokens of all requests in a batch are flattened into one `[T]` stream; attention over each
request's paged KV is the `attn` backend's job. Module names follow the Hugging Face checkpoints
(`model.layers.N.self_attn`, `model.norm`, `lm_head`). What families change:
- the norm kind (Gemma's `1 + w` weights) and "sandwich" norms (each block's output normalized
  again before joining the residual: Gemma's `post_attention_layernorm`, then
  `pre_feedforward_layernorm` and `post_feedforward_layernorm`);
- q/k norms per head (Qwen3, Gemma 3), a second RoPE table for the sliding-window layers
  (Gemma 3, when `config.family.rope_local_theta` is set), embeddings scaled by sqrt(hidden),
  soft-capped final logits (Gemma);
- the feed-forward module's checkpoint name (Mixtral's `block_sparse_moe`) and MoE layers
  (`config.moe`), loaded with `load_moe_weights`;
- prepacked CPU weights, and checkpoint renames (Phi-3's fused tensors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from sglr.errors import ModelConfigError
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.model.config import ModelConfig, RopeScaling
from sglr.model.family import DecoderOptions
from sglr.model.feed_forward import feed_forward
from sglr.model.layers import NORMS, Linear, VocabParallelEmbedding, load_named_weights
from sglr.model.moe import load_moe_weights
from sglr.model.parallel import TensorParallel
from sglr.model.rope import RotaryEmbedding
from sglr.model.self_attention import CosSin, SelfAttention


class DecoderLayer(torch.nn.Module):
    """`h + attn(norm(h))`, then `h + ffn(norm(h))` (with sandwich norms: `h + norm(attn(norm(h)))`,
    then `h + norm(ffn(norm(h)))`)."""

    def __init__(
        self,
        config: ModelConfig,
        options: DecoderOptions,
        layer_id: int,
        dtype: torch.dtype,
        tp: TensorParallel | None,
    ) -> None:
        super().__init__()
        self.is_local = config.family.layer_window(layer_id) is not None
        self.self_attn = SelfAttention(
            config, layer_id, dtype, tp, qk_norm=options.norm if options.qk_norm else None
        )
        self.ffn_name = options.ffn_name
        self.add_module(options.ffn_name, feed_forward(config, layer_id, dtype, tp))
        norm, size, eps = NORMS[options.norm], config.hidden_size, config.rms_norm_eps
        self.input_layernorm = norm(size, eps, dtype)
        self.post_attention_layernorm = norm(size, eps, dtype)
        self.sandwich_norms = options.sandwich_norms
        if options.sandwich_norms:
            self.pre_feedforward_layernorm = norm(size, eps, dtype)
            self.post_feedforward_layernorm = norm(size, eps, dtype)

    @property
    def ffn(self) -> torch.nn.Module:
        return getattr(self, self.ffn_name)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        attended = self.self_attn(self.input_layernorm(hidden), cos_sin, attn)
        if not self.sandwich_norms:
            hidden = hidden + attended
            return hidden + self.ffn(self.post_attention_layernorm(hidden))
        hidden = hidden + self.post_attention_layernorm(attended)
        mixed = self.ffn(self.pre_feedforward_layernorm(hidden))
        return hidden + self.post_feedforward_layernorm(mixed)


class DecoderStack(torch.nn.Module):
    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None, options: DecoderOptions
    ) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        self.layers = torch.nn.ModuleList(
            DecoderLayer(config, options, i, dtype, tp) for i in range(config.num_hidden_layers)
        )
        self.norm = NORMS[options.norm](config.hidden_size, config.rms_norm_eps, dtype)


class DecoderForCausalLM(torch.nn.Module):
    """`forward` maps a flat token stream to final hidden states; `compute_logits` applies the
    head; `load_weights`, `attention_variants` as the runner uses them."""

    def __init__(
        self,
        config: ModelConfig,
        dtype: torch.dtype,
        max_positions: int,
        tp: TensorParallel | None = None,
        options: DecoderOptions | None = None,
    ) -> None:
        super().__init__()
        options = options or DecoderOptions()
        if options.needs_attention_bias and not config.attention_bias:
            raise ModelConfigError(
                f"{config.architecture} checkpoints have q/k/v biases; config says attention_bias=False"
            )
        self.config = config
        self.options = options
        self.model = DecoderStack(config, dtype, tp, options)
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
        self.embed_scale = config.hidden_size**0.5 if options.scale_embeddings else None
        cap = config.family.final_logit_softcap
        self.final_logit_softcap = cap if options.final_logit_softcap else None
        if options.prepack_on_cpu:
            # On the CPU, a weight repacked at every call costs more than a small batch's multiply.
            for module in self.modules():
                if isinstance(module, (Linear, VocabParallelEmbedding)):
                    module.prepack_on_cpu = True

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
        if input_embeds is not None:
            hidden = input_embeds
        else:
            hidden = self.model.embed_tokens(input_ids)
            if self.embed_scale is not None:
                # transformers rounds the scale to the model dtype before multiplying.
                hidden = hidden * torch.tensor(self.embed_scale, dtype=hidden.dtype)
        cos_sin = self.rope.lookup(positions)
        local_cos_sin = cos_sin if self.local_rope is None else self.local_rope.lookup(positions)
        for layer in self.model.layers:
            hidden = layer(hidden, local_cos_sin if layer.is_local else cos_sin, attn)
        return self.model.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`[N, hidden]` -> fp32 logits `[N, vocab]`."""
        head = self.model.embed_tokens if self.lm_head is None else self.lm_head
        logits = head.logits(hidden)
        cap = self.final_logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def attention_variants(self) -> list[AttentionVariant]:
        """Each layer's window / soft-cap / scale, in layer order, for the attention backend."""
        return [layer.self_attn.variant for layer in self.model.layers]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        renames = self.options.checkpoint_renames
        if renames is not None:
            weights = renames(self.config, weights)
        load = load_named_weights if self.config.moe is None else load_moe_weights
        load(self, weights, ignored_names=self.ignored_checkpoint_names())

    def ignored_checkpoint_names(self) -> tuple[str, ...]:
        return ("lm_head.weight",) if self.config.tie_word_embeddings else ()
