"""A CPU decode step in one Rust call (`sglr._core.CpuDecodeModel`, rust/kernels' decode) for
pre-norm decoders whose matrices are all kept quantized (a GGUF checkpoint in Q4_0 / Q4_1, Q5_0 / Q5_1, Q8_0
or the K-quants Q4_K / Q5_K / Q6_K).

Why: a small model's batch-1 decode step run layer by layer from Python is a few hundred small
operations (norms, rotary, KV writes, attention, four matmuls, residuals per layer), each with its
own dispatch, dtype round trip and intra-op thread team; a second thread made such a step slower.
The fused step keeps the residual stream in f32, quantizes each matmul's input to int8 once, and
splits every matmul over one persistent thread pool. The runner uses it for decode batches of up
to `FUSED_MAX_BATCH` requests; prefill and larger batches keep the layered path (same weights:
the quantized matrices are shared, not copied).

Which models take it is decided by their layers, not their class (`unsupported_reason`): a
decoder on the CPU without tensor parallelism whose every layer is pre-norm RMSNorm, attention
without soft-capping (one attention scale for all layers; windows and per-head RMSNorm q/k norms
allowed) and a SiLU gated MLP, every q/k/v, o, gate/up and down matrix quantized, bias only on
q/k/v, plain token embeddings, one RoPE table, no final soft-cap, a bf16 or f32 KV cache. Llama,
Mistral, Qwen2 and Qwen3 files qualify; the others fall back to the layered path with the reason
logged (Gemma: offset and sandwich norms, GeLU, soft-caps; mixture-of-experts blocks; Phi-3
files, whose fused q/k/v matrix stays dequantized).
`SGLR_CPU_FUSED_DECODE=0` turns it off (benchmarks compare the two).

LoRA adapters run inside the step: the runner's `ModelLoras` hands each loaded adapter's packed
pairs over (`add_adapter`; this object is its listener), and a decode batch passes each row's
adapter id, so decode batches with adapters take the fused step too (prefill keeps the layered
path and its torch deltas).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from sglr.envs import cpu_decode_threads, cpu_fused_decode
from sglr.kernels.numpy_views import BIT_VIEWS, numpy_view
from sglr.model.decoder import DecoderForCausalLM, DecoderLayer
from sglr.model.feed_forward import GatedMLP
from sglr.model.forward_batch import ForwardBatch
from sglr.model.kv_cache import KVCache
from sglr.model.layers import RMSNorm
from sglr.model.rope import compute_inv_freq

# Decode batches up to this size take the fused step: its integer matmuls unpack each weight
# block once per 4 requests and stay ahead of the layered path (dequantize + oneDNN GEMM per
# step) up to here. SmolLM2 at 129 tokens, ms per step fused / layered, 1 thread: batch 16
# 68 / 94, 32 133 / 213, 64 270 / 307, 128 615 / 469; 2 threads: 47 / 82, 89 / 149,
# 171 / 307, 428 / 417.
FUSED_MAX_BATCH = 64

logger = logging.getLogger(__name__)


def unsupported_reason(model: torch.nn.Module, kv_cache: KVCache) -> str | None:
    """Why the fused step cannot run `model` over `kv_cache` (None: it can)."""
    if not isinstance(model, DecoderForCausalLM):
        return f"{type(model).__name__} is not a decoder"
    if kv_cache.dtype not in BIT_VIEWS or kv_cache.k_buffer.device.type != "cpu":
        return f"a {kv_cache.dtype} KV cache on {kv_cache.k_buffer.device.type}"
    if model.embed_scale is not None or model.final_logit_softcap is not None:
        return "scaled embeddings or soft-capped logits"
    if model.local_rope is not None or not isinstance(model.model.norm, RMSNorm):
        return "a RoPE table of its own for local layers, or an offset final norm"
    if len({layer.self_attn.variant.scale for layer in model.model.layers}) > 1:
        return "attention scales that differ by layer"
    for layer_id, layer in enumerate(model.model.layers):
        reason = _layer_unsupported_reason(layer)
        if reason is not None:
            return f"layer {layer_id}: {reason}"
    return None


def _layer_unsupported_reason(layer: torch.nn.Module) -> str | None:
    if not isinstance(layer, DecoderLayer) or layer.sandwich_norms:
        return "not a pre-norm decoder layer"
    if not all(isinstance(n, RMSNorm) for n in (layer.input_layernorm, layer.post_attention_layernorm)):
        return "offset norms"
    attn, mlp = layer.self_attn, layer.ffn
    if attn.q_norm is not None and not (
        isinstance(attn.q_norm, RMSNorm) and isinstance(attn.k_norm, RMSNorm)
    ):
        return "offset q/k norms per head"
    if attn.variant.logit_softcap is not None:
        return "soft-capped attention scores"
    if not isinstance(mlp, GatedMLP):
        return f"a {type(mlp).__name__} feed-forward module"
    if mlp.hidden_act != "silu":
        return f"a {mlp.hidden_act} MLP"
    linears = {"qkv_proj": attn.qkv_proj, "o_proj": attn.o_proj}
    linears.update(gate_up_proj=mlp.gate_up_proj, down_proj=mlp.down_proj)
    for name, linear in linears.items():
        if linear.quantized is None:
            return f"{name} is not kept quantized"
        if linear.bias is not None and name != "qkv_proj":
            return f"a bias on {name}"
    return None


def _head_norms(attn: torch.nn.Module) -> tuple[np.ndarray, np.ndarray, float] | None:
    if attn.q_norm is None:
        return None
    return _f32(attn.q_norm.weight), _f32(attn.k_norm.weight), float(attn.q_norm.eps)


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).contiguous().numpy()


class CpuFusedDecode:
    """The model's decode step over the runner's KV cache and request table."""

    def __init__(self, model: DecoderForCausalLM, kv_cache: KVCache, req_to_token: torch.Tensor) -> None:
        from sglr._core import CpuDecodeModel

        config = model.config
        layers = []
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.ffn
            bias = attn.qkv_proj.bias
            layers.append(
                (
                    _f32(layer.input_layernorm.weight),
                    attn.qkv_proj.quantized,
                    None if bias is None else _f32(bias),
                    attn.o_proj.quantized,
                    _f32(layer.post_attention_layernorm.weight),
                    mlp.gate_up_proj.quantized,
                    mlp.down_proj.quantized,
                    attn.variant.sliding_window,
                    _head_norms(attn),
                )
            )
        head_module = model.model.embed_tokens if model.lm_head is None else model.lm_head
        self._head_module = head_module
        self._embed = model.model.embed_tokens
        head = head_module.q8.matrix if head_module.q8 is not None else head_module.quantized
        inv_freq = compute_inv_freq(config)
        positions = torch.arange(model.rope.max_positions, dtype=torch.float32)
        freqs = positions[:, None] * inv_freq[None, :]  # one rounding per angle, as the rope module
        first = model.model.layers[0].self_attn
        self._model = CpuDecodeModel(
            config.hidden_size,
            first.num_heads,
            first.num_kv_heads,
            first.head_dim,
            config.intermediate_size,
            float(model.model.norm.eps),
            float(first.variant.scale),
            layers,
            _f32(model.model.norm.weight),
            head,
            freqs.cos().numpy(),
            freqs.sin().numpy(),
            cpu_decode_threads() or torch.get_num_threads(),
        )
        self._k_cache = numpy_view(kv_cache.k_buffer)
        self._v_cache = numpy_view(kv_cache.v_buffer)
        self._table = req_to_token.numpy()
        self.has_head = head is not None

    @classmethod
    def build(
        cls, model: torch.nn.Module, kv_cache: KVCache, req_to_token: torch.Tensor
    ) -> CpuFusedDecode | None:
        """The fused step for `model`, or None where it does not apply (the reason logged) or is
        turned off."""
        if not cpu_fused_decode():
            return None
        reason = unsupported_reason(model, kv_cache)
        if reason is not None:
            logger.info("fused CPU decode off for %s: %s", model.config.architecture, reason)
            return None
        return cls(model, kv_cache, req_to_token)

    def add_adapter(
        self, adapter_id: int, layers: list[tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]]
    ) -> None:
        """Loads an adapter's packed pairs (per layer: q/k/v, o, gate/up, down; each shrink
        `[in, R]` and expand `[R, out]`, as `LinearLoraDeltas` packs them, or None)."""
        self._model.add_adapter(
            adapter_id,
            [
                tuple(None if pair is None else (_f32(pair[0].t()), _f32(pair[1].t())) for pair in layer)
                for layer in layers
            ],
        )

    def remove_adapter(self, adapter_id: int) -> None:
        self._model.remove_adapter(adapter_id)

    def applies(self, batch: ForwardBatch) -> bool:
        return batch.is_decode and batch.batch_size <= FUSED_MAX_BATCH and not batch.image_spans

    def forward(self, batch: ForwardBatch) -> torch.Tensor:
        """fp32 logits `[B, vocab]` of a decode batch (its K/V written to the cache). The request
        table must already hold this step's slots."""
        seq_lens = batch.seq_lens_cpu
        rows = batch.req_rows_cpu
        slot_table = np.ascontiguousarray(self._table[rows, : int(seq_lens.max())], dtype=np.int32)
        hidden = self._embed(batch.input_ids).float().numpy()
        num_requests = rows.shape[0]
        out = np.empty((num_requests, self._model.output_width), dtype=np.float32)
        self._model.step(
            hidden,
            seq_lens - 1,
            slot_table,
            seq_lens,
            batch.out_cache_slots.numpy(),
            self._k_cache,
            self._v_cache,
            out,
            batch.token_lora_ids,  # one token per row; None: the base model
        )
        if self.has_head:
            return torch.from_numpy(out)
        return self._head_module.logits(torch.from_numpy(out).to(self._embed.dtype))
