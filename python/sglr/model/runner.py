"""`ModelRunner`: a loaded model, its KV cache and request table, and one `forward` per step.

The engine's side of the contract:
- slot ids are `1..runner.num_kv_slots` and request rows `1..max_num_reqs` (the engine's
  `KVPool` hands them out; a caller driving the runner alone picks its own);
- build a batch with `runner.extend_batch([...ExtendRequest])` or `runner.decode_batch(...)`
  (validated against the runner's limits), call `runner.forward(batch)`, sample from
  `output.next_token_logits` with `sglr.model.sampler.sample`.
`forward` writes the batch's K/V into the cache and its slots into the request table; it never
allocates or frees slots or rows.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sglr.envs import cpu_decode_threads
from sglr.errors import ModelConfigError
from sglr.kernels.attention import ATTENTION_BACKENDS, create_attention_backend
from sglr.kernels.attention_metadata import AttentionMetadata
from sglr.kernels.attention_variant import AttentionVariant
from sglr.model.config import ModelConfig, load_model_config
from sglr.model.cpu_fused_decode import CpuFusedDecode
from sglr.model.cuda_graph import DecodeCudaGraphs
from sglr.model.forward_batch import BatchLimits, ExtendRequest, ForwardBatch, IntArrayLike, RowWrites
from sglr.model.gguf_quantized import load_quantized_linears, without_names
from sglr.model.kv_cache import KVCache, KVCacheShape, kv_slots_for_memory_fraction
from sglr.model.loader import (
    fill_dummy_weights,
    iter_checkpoint_tensors,
    release_freed_heap,
    resolve_checkpoint_dir,
)
from sglr.model.logprobs import TokenLogprobs, score_tokens
from sglr.model.parallel import TensorParallel
from sglr.model.registry import build_model
from sglr.model.req_to_token import ReqToTokenTable

# After a CPU extend batch of at least this many tokens the freed heap goes back to the OS: its
# activations are tens of MB that glibc would keep for reuse (SmolLM2, 16 prompts of 128 tokens:
# 60 MB), for the price of faulting some of them in again at the next large batch.
_TRIM_AFTER_TOKENS = 512

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
GGUF_WEIGHTS = ("auto", "quantized", "dequantized")
_CPU_DEFAULT_KV_TOKENS = 65536
_GPU_DEFAULT_MEM_FRACTION = 0.85
_LOGPROB_CHUNK = 512


@dataclass(frozen=True)
class RunnerConfig:
    """How to load and run a model.

    model_path: a Hugging Face-format directory, a `.gguf` file (converted once, cached), None for
        the embedded default model, or a Hub id when a network is there.
    dtype: "auto" = the checkpoint's dtype on CUDA, float32 on CPU.
    device: "auto" = "cuda" when available, else "cpu".
    kv_num_tokens / mem_fraction: KV cache size as a token count, or as the fraction of device
        memory the process may use in total (weights included). Default: 0.85 on CUDA,
        65536 tokens on CPU. Give at most one.
    max_num_reqs: rows of the request table (requests in flight at once).
    max_context_len: longest sequence; default the model's `max_position_embeddings`.
    attention_backend: "auto" | "torch" | "triton" | "flashinfer".
    load_format: "auto" (safetensors, or .bin) | "dummy" (seeded random weights; needs only
        config.json).
    cuda_graph_max_bs: capture decode CUDA graphs up to this batch size (0 disables them).
    gguf_weights: for a GGUF checkpoint on the CPU, "quantized" keeps its Q4_0 / Q4_1 / Q8_0 /
        Q4_K / Q5_K / Q6_K matrices as stored in memory and multiplies them as such
        (`sglr.kernels.cpu_quantized`, and decode steps in one Rust call,
        `sglr.model.cpu_fused_decode`; the run dtype is bfloat16); "dequantized" converts every
        weight to the run dtype; "auto" is quantized where it applies (a GGUF file with 4- to
        6-bit matrices, or with only quantized layer matrices, on the CPU, one rank, dtype auto or
        bfloat16; `runs_quantized_by_default`), dequantized otherwise: on SmolLM2 (Q4_1)
        quantized decodes ~3x faster than bf16 at ~0.95x its prefill speed, and a Q8_0 file
        decodes ~4x and prefills ~1.5x faster than its float32 conversion
        (benches/results/smollm2_cpu_gguf.md).
    """

    model_path: str | Path | None
    dtype: str = "auto"
    device: str = "auto"
    kv_num_tokens: int | None = None
    mem_fraction: float | None = None
    max_num_reqs: int = 256
    max_context_len: int | None = None
    attention_backend: str = "auto"
    load_format: str = "auto"
    seed: int = 0
    cuda_graph_max_bs: int = 256
    cuda_graph_batch_sizes: tuple[int, ...] = field(default=())
    gguf_weights: str = "auto"

    def __post_init__(self) -> None:
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ModelConfigError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {self.dtype!r}")
        if self.kv_num_tokens is not None and self.mem_fraction is not None:
            raise ModelConfigError("give kv_num_tokens or mem_fraction, not both")
        if self.kv_num_tokens is not None and self.kv_num_tokens < 1:
            raise ModelConfigError(f"kv_num_tokens must be >= 1, got {self.kv_num_tokens}")
        if self.mem_fraction is not None and not 0.0 < self.mem_fraction <= 1.0:
            raise ModelConfigError(f"mem_fraction must be in (0, 1], got {self.mem_fraction}")
        if self.max_num_reqs < 1 or (self.max_context_len is not None and self.max_context_len < 1):
            raise ModelConfigError("max_num_reqs and max_context_len must be >= 1")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ModelConfigError(f"attention_backend must be one of {ATTENTION_BACKENDS}")
        if self.load_format not in ("auto", "dummy"):
            raise ModelConfigError(f"load_format must be 'auto' or 'dummy', got {self.load_format!r}")
        if self.cuda_graph_max_bs < 0:
            raise ModelConfigError("cuda_graph_max_bs must be >= 0")
        if self.gguf_weights not in GGUF_WEIGHTS:
            raise ModelConfigError(f"gguf_weights must be one of {GGUF_WEIGHTS}, got {self.gguf_weights!r}")


@dataclass(frozen=True)
class ForwardOutput:
    """next_token_logits: fp32 `[B, V]`, the distribution after each request's last token. With
    decode CUDA graphs it is a view of the graph's output buffer: use it before the next forward.
    prompt_logprobs: per request, `TokenLogprobs` for the positions asked via
    `ExtendRequest.logprob_start` (scoring the next prompt token at each), else None."""

    next_token_logits: torch.Tensor
    prompt_logprobs: list[TokenLogprobs | None]


class ModelRunner:
    """With `tp` (tensor parallelism), this rank's shard of the model and of the KV heads; rank 0
    drives every step (`forward_extend` / `forward_decode` send the batch's recipe to the other
    ranks, which run it in `follow`)."""

    def __init__(self, config: RunnerConfig, tp: TensorParallel | None = None) -> None:
        self.runner_config = config
        self.tp = tp
        self.device = resolve_device(config.device)
        # The GGUF file whose quantized matrices stay quantized, or None (see `RunnerConfig.gguf_weights`).
        quantized_source = quantized_gguf_source(config, tp is not None)
        self.weights_format = "quantized" if quantized_source is not None else "dequantized"
        self.model_dir = resolve_model_dir(config, tp is not None)
        self.config: ModelConfig = load_model_config(self.model_dir)
        self.dtype = (
            torch.bfloat16
            if quantized_source is not None
            else _resolve_dtype(config.dtype, self.config, self.device)
        )
        self.max_context_len = config.max_context_len or self.config.max_position_embeddings
        self.model = build_model(self.config, self.dtype, self.device, self.max_context_len, tp)
        if config.load_format == "dummy":
            fill_dummy_weights(self.model, seed=config.seed + (tp.rank if tp else 0))
        elif quantized_source is not None:
            consumed = load_quantized_linears(self.model, quantized_source)
            # Lazy: the dense copies of the quantized matrices in the converted directory are never read.
            self.model.load_weights(
                without_names(iter_checkpoint_tensors(self.model_dir, lazy=True), consumed)
            )
        else:
            self.model.load_weights(iter_checkpoint_tensors(self.model_dir, lazy=tp is not None))
        release_freed_heap()
        num_kv_heads = self.model.model.layers[0].self_attn.num_kv_heads  # this rank's
        shape = KVCacheShape(self.config.num_hidden_layers, num_kv_heads, self.config.head_dim, self.dtype)
        self.req_to_token = ReqToTokenTable(config.max_num_reqs, self.max_context_len, self.device)
        num_slots = self._kv_num_slots(shape)
        if tp is not None:  # slot ids are rank 0's decisions: every rank needs as many slots
            num_slots = tp.min_over_ranks(num_slots)
        self.kv_cache = KVCache(shape, num_slots, self.device)
        self.attn = create_attention_backend(
            config.attention_backend,
            self.kv_cache,
            self.req_to_token.table,
            self.config.head_dim**-0.5,
            _without_idle_windows(self.model.attention_variants(), self.max_context_len),
        )
        self.fused_decode = (
            CpuFusedDecode.build(self.model, self.kv_cache, self.req_to_token.table)
            if tp is None and self.device.type == "cpu"
            else None
        )
        self.vocab_size = self.config.vocab_size
        # Usable KV slots; slot ids are `1..num_kv_slots` (0 is padding).
        self.num_kv_slots = self.kv_cache.num_slots
        self.limits = BatchLimits(
            self.vocab_size, self.num_kv_slots, config.max_num_reqs, self.max_context_len
        )
        self.cuda_graphs: DecodeCudaGraphs | None = None
        # NOTE: decode graphs are not captured under tensor parallelism (collectives inside).
        graphs_ok = tp is None and config.cuda_graph_max_bs > 0 and self.attn.supports_cuda_graph
        if self.device.type == "cuda" and graphs_ok:
            max_bs = min(config.cuda_graph_max_bs, config.max_num_reqs)
            self.cuda_graphs = DecodeCudaGraphs(
                self._logits_of_every_token, self.device, max_bs, config.cuda_graph_batch_sizes or None
            )

    def release_device_memory(self) -> None:
        """Drops the weights, KV cache and captured graphs (the runner is unusable afterwards) and
        hands torch's cached blocks back to the device, for a process that loads another model."""
        for name in ("cuda_graphs", "fused_decode", "attn", "kv_cache", "req_to_token", "model"):
            setattr(self, name, None)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def extend_batch(self, requests: Sequence[ExtendRequest]) -> ForwardBatch:
        return ForwardBatch.extend(requests, self.device, self.limits)

    def decode_batch(
        self, req_rows: IntArrayLike, input_ids: IntArrayLike, seq_lens: IntArrayLike,
        out_cache_slots: IntArrayLike, row_writes: RowWrites | None = None,
    ) -> ForwardBatch:  # fmt: skip
        return ForwardBatch.decode(
            req_rows, input_ids, seq_lens, out_cache_slots, self.device, self.limits, row_writes
        )

    def forward_extend(self, requests: Sequence[ExtendRequest]) -> ForwardOutput:
        """Builds and runs an extend batch (on every rank under tensor parallelism)."""
        return self._run_recipe(("extend", list(requests)), lead=True)

    def forward_decode(
        self, req_rows: IntArrayLike, input_ids: IntArrayLike, seq_lens: IntArrayLike,
        out_cache_slots: IntArrayLike, row_writes: RowWrites | None = None,
    ) -> ForwardOutput:  # fmt: skip
        """Builds and runs a decode batch (on every rank under tensor parallelism)."""
        arrays = [np.asarray(a, dtype=np.int64) for a in (req_rows, input_ids, seq_lens, out_cache_slots)]
        return self._run_recipe(("decode", (*arrays, row_writes)), lead=True)

    def follow(self) -> None:
        """A rank other than 0: runs rank 0's batches until it says stop."""
        assert self.tp is not None and self.tp.rank != 0
        while True:
            recipe = self.tp.broadcast_from_first(None)
            if recipe is None:
                return
            self._run_recipe(recipe, lead=False)

    def stop_followers(self) -> None:
        """Rank 0: lets the other ranks' `follow` return."""
        if self.tp is not None:
            self.tp.broadcast_from_first(None)

    def _run_recipe(self, recipe: tuple[str, Any], lead: bool) -> ForwardOutput:
        if lead and self.tp is not None:
            self.tp.broadcast_from_first(recipe)
        kind, args = recipe
        batch = self.extend_batch(args) if kind == "extend" else self.decode_batch(*args)
        return self.forward(batch)

    def forward(self, batch: ForwardBatch) -> ForwardOutput:
        """Runs one step. Mutates the KV cache (this batch's K/V) and the request table rows."""
        if not batch.is_decode and self.device.type == "cpu" and batch.num_tokens >= _TRIM_AFTER_TOKENS:
            try:
                return self._forward(batch)
            finally:
                release_freed_heap()
        limit = cpu_decode_threads() if batch.is_decode and self.device.type == "cpu" else None
        threads = torch.get_num_threads()
        if limit is None or limit >= threads:
            return self._forward(batch)
        torch.set_num_threads(limit)
        try:
            return self._forward(batch)
        finally:
            torch.set_num_threads(threads)

    @torch.inference_mode()
    def _forward(self, batch: ForwardBatch) -> ForwardOutput:
        table = self.req_to_token.table
        # The runner is the table's only writer: every batch brings the entries it needs.
        table[batch.table_rows, batch.table_cols] = batch.table_slots.to(table.dtype)
        graphs = self.cuda_graphs
        if batch.is_decode and graphs is not None and graphs.can_run(batch.batch_size):
            logits = graphs.replay(batch)
            return ForwardOutput(logits, [None] * batch.batch_size)
        if self.fused_decode is not None and self.fused_decode.applies(batch):
            return ForwardOutput(self.fused_decode.forward(batch), [None] * batch.batch_size)
        self.attn.begin(batch)
        if batch.image_spans:
            embeds = self.model.embed_with_images(batch.input_ids, batch.image_spans)
            hidden = self.model(batch.input_ids, batch.positions, self.attn, input_embeds=embeds)
        else:
            hidden = self.model(batch.input_ids, batch.positions, self.attn)  # [T, hidden]
        last = torch.from_numpy(batch.extend_starts_cpu + batch.extend_lens_cpu - 1).to(self.device)
        logits = self.model.compute_logits(hidden[last])
        prompt_logprobs: list[TokenLogprobs | None] = [None] * batch.batch_size
        if batch.wants_prompt_logprobs:
            for i, start in enumerate(batch.logprob_starts):
                if start is not None:
                    prompt_logprobs[i] = self._prompt_logprobs(batch, i, start, hidden)
        return ForwardOutput(logits, prompt_logprobs)

    def _logits_of_every_token(
        self, input_ids: torch.Tensor, positions: torch.Tensor, metadata: AttentionMetadata
    ) -> torch.Tensor:
        """A decode step's body as the CUDA graphs capture it (one token per request)."""
        self.attn.begin(metadata)
        return self.model.compute_logits(self.model(input_ids, positions, self.attn))

    def _prompt_logprobs(
        self, batch: ForwardBatch, index: int, start: int, hidden: torch.Tensor
    ) -> TokenLogprobs:
        """Scores tokens `start+1 .. seq_len-1` of request `index` from the logits at `start ..`."""
        chunk_start = int(batch.extend_starts_cpu[index])
        first = chunk_start + start - int(batch.prefix_lens_cpu[index])
        end = (
            chunk_start + int(batch.extend_lens_cpu[index]) - 1
        )  # the last position scores the unknown next token
        rows = hidden[first:end]
        next_ids = batch.input_ids[first + 1 : end + 1]
        top_k = batch.top_logprobs_nums[index]
        # Chunks bound the fp32 logits held at once to `_LOGPROB_CHUNK x vocab`.
        parts = [
            score_tokens(
                self.model.compute_logits(rows[s : s + _LOGPROB_CHUNK]),
                next_ids[s : s + _LOGPROB_CHUNK],
                top_k,
            )
            for s in range(0, rows.shape[0], _LOGPROB_CHUNK)
        ]
        return TokenLogprobs.concat(parts, top_k)

    def _kv_num_slots(self, shape: KVCacheShape) -> int:
        cfg = self.runner_config
        if cfg.kv_num_tokens is not None:
            return cfg.kv_num_tokens
        if cfg.mem_fraction is None and self.device.type != "cuda":
            return _CPU_DEFAULT_KV_TOKENS
        fraction = cfg.mem_fraction or _GPU_DEFAULT_MEM_FRACTION
        # Keep room for activations of a large prefill and for the CUDA graphs' logits.
        reserve = 2**30 if self.device.type == "cuda" else 0
        return kv_slots_for_memory_fraction(shape, self.device, fraction, reserve)


def _without_idle_windows(variants: list[AttentionVariant], max_context_len: int) -> list[AttentionVariant]:
    """A window at least as long as the context hides nothing: dropping it keeps such models
    (e.g. Mistral 7B v0.1's 4096 window under a 4096 context) on backends without windows."""
    return [
        dataclasses.replace(v, sliding_window=None)
        if v.sliding_window is not None and v.sliding_window >= max_context_len
        else v
        for v in variants
    ]


def resolve_model_dir(config: RunnerConfig, tensor_parallel: bool = False) -> Path:
    """The Hugging Face-format directory the runner loads (a GGUF file is converted once, to
    the dtype the device computes in: bf16 when its quantized matrices stay so, which never
    happens under tensor parallelism)."""
    device = resolve_device(config.device)
    gguf_dtype = (
        config.dtype if config.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    )
    if quantized_gguf_source(config, tensor_parallel) is not None:
        gguf_dtype = "bfloat16"
    return resolve_checkpoint_dir(config.model_path, gguf_dtype)


def quantized_gguf_source(config: RunnerConfig, tensor_parallel: bool) -> Path | None:
    """The GGUF file to load quantized matrices from when `config` runs quantized, else None. Raises
    `ModelConfigError` when "quantized" is asked for where it cannot apply."""
    if config.gguf_weights == "dequantized" or config.load_format == "dummy":
        return None
    from sglr.model.default_model import gguf_source_path

    path = config.model_path
    source = None if path is not None and not Path(path).expanduser().exists() else gguf_source_path(path)
    problem = None
    if source is None:
        problem = "the model is not a GGUF file"
    elif resolve_device(config.device).type != "cpu":
        problem = "quantized GGUF weights run on the CPU only"
    elif tensor_parallel:
        problem = "quantized GGUF weights do not support tensor parallelism"
    elif config.dtype not in ("auto", "bfloat16"):
        problem = f"quantized GGUF weights compute in bfloat16, not {config.dtype}"
    elif config.gguf_weights == "auto" and not runs_quantized_by_default(source):
        problem = "float matrices"  # "auto" keeps the file's precision
    if problem is None:
        return source
    if config.gguf_weights == "quantized":
        raise ModelConfigError(f"gguf_weights='quantized': {problem}")
    return None


def runs_quantized_by_default(gguf_path: Path) -> bool:
    """Whether `gguf_weights="auto"` keeps the file's matrices quantized (reads the header only):
    when any matrix is 4- to 6-bit (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), or when every layer
    matrix is in a kernel format (a Q8_0 file: then nothing finer than 8 bits is lost, and the
    8-bit kernels beat the float32 conversion at prefill, decode and memory; a file with float
    matrices keeps its precision)."""
    from gguf import GGMLQuantizationType

    from sglr.model.gguf.tensor_types import gguf_tensor_types
    from sglr.model.gguf_quantized import LOW_BIT_TYPE_NAMES, QUANTIZED_TYPE_NAMES

    types = {name: GGMLQuantizationType(code).name for name, code in gguf_tensor_types(gguf_path).items()}
    if any(kind in LOW_BIT_TYPE_NAMES for kind in types.values()):
        return True
    # Layer matrices: not norms, not MoE routers (kept in float by llama.cpp).
    matrices = [
        kind
        for name, kind in types.items()
        if name.startswith("blk.")
        and name.endswith(".weight")
        and "norm" not in name
        and "gate_inp" not in name
    ]
    return bool(matrices) and all(kind in QUANTIZED_TYPE_NAMES for kind in matrices)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelConfigError("device 'cuda' requested but CUDA is not available")
    return device


def _resolve_dtype(name: str, config: ModelConfig, device: torch.device) -> torch.dtype:
    if name != "auto":
        return _DTYPES[name]
    if device.type != "cuda":
        return torch.float32
    return _DTYPES.get(config.torch_dtype, torch.bfloat16)
