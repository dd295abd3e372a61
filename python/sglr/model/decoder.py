"""A pre-norm decoder-only language model assembled from per-layer parts a family chooses.

The newer families (Qwen3, Mixtral, Qwen2-MoE, Qwen3-MoE) differ from Llama only inside a layer
(q/k norms, a MoE block in place of the MLP), so each supplies `make_layer` and shares the rest:
embeddings, rotary tables, the final norm, the head and weight loading. Module names follow the
Hugging Face checkpoints (`model.layers.N.self_attn`, `model.norm`, `lm_head`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.model.config import ModelConfig
from sglr.model.layers import Linear, RMSNorm, VocabParallelEmbedding, load_named_weights
from sglr.model.parallel import TensorParallel
from sglr.model.rope import RotaryEmbedding

CosSin = tuple[torch.Tensor, torch.Tensor]


class DecoderLayer(torch.nn.Module):
    """`h + attn(norm(h))`, then `h + ffn(norm(h))`. `ffn_name` is the checkpoint's name of the
    feed-forward module (`mlp`, or Mixtral's `block_sparse_moe`)."""

    def __init__(
        self,
        config: ModelConfig,
        dtype: torch.dtype,
        self_attn: torch.nn.Module,
        ffn: torch.nn.Module,
        ffn_name: str = "mlp",
    ) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.ffn_name = ffn_name
        self.add_module(ffn_name, ffn)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)

    def forward(self, hidden: torch.Tensor, cos_sin: CosSin, attn: AttentionBackend) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos_sin, attn)
        ffn = getattr(self, self.ffn_name)
        return hidden + ffn(self.post_attention_layernorm(hidden))


class DecoderStack(torch.nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        dtype: torch.dtype,
        tp: TensorParallel | None,
        layers: Iterable[torch.nn.Module],
    ) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        self.layers = torch.nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)


class DecoderForCausalLM(torch.nn.Module):
    """The model interface the runner uses (`forward`, `compute_logits`, `load_weights`), over
    the layers of `make_layer`."""

    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        super().__init__()
        self.config = config
        layers = (self.make_layer(config, i, dtype, tp) for i in range(config.num_hidden_layers))
        self.model = DecoderStack(config, dtype, tp, layers)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else VocabParallelEmbedding(config.vocab_size, config.hidden_size, dtype, tp)
        )
        self.rope = RotaryEmbedding(config, max_positions, dtype)
        # On the CPU, a weight repacked at every call costs more than a small batch's multiply.
        for module in self.modules():
            if isinstance(module, (Linear, VocabParallelEmbedding)):
                module.prepack_on_cpu = True

    def make_layer(
        self, config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> torch.nn.Module:
        raise NotImplementedError

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionBackend
    ) -> torch.Tensor:
        """input_ids, positions `[T]` -> normalized hidden states `[T, hidden]`. Writes this
        batch's K/V into the cache (through `attn`)."""
        hidden = self.model.embed_tokens(input_ids)
        cos_sin = self.rope.lookup(positions)
        for layer in self.model.layers:
            hidden = layer(hidden, cos_sin, attn)
        return self.model.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`[N, hidden]` -> fp32 logits `[N, vocab]`."""
        head = self.model.embed_tokens if self.lm_head is None else self.lm_head
        return head.logits(hidden)

    def attention_variants(self) -> list[AttentionVariant]:
        """Each layer's window / soft-cap / scale, for the attention backend."""
        return [layer.self_attn.variant for layer in self.model.layers]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        load_named_weights(self, weights, ignored_names=self.ignored_checkpoint_names())

    def ignored_checkpoint_names(self) -> tuple[str, ...]:
        return ("lm_head.weight",) if self.config.tie_word_embeddings else ()
