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

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sglr.envs import cpu_decode_threads, cpu_isa
from sglr.errors import BatchError
from sglr.kernels.attention import create_attention_backend
from sglr.kernels.attention_variant import without_idle_windows
from sglr.model.batch_rows import BatchLimits, RowCopies, RowWrites
from sglr.model.build import build_model
from sglr.model.chained_ids import ChainedIds
from sglr.model.config import ModelConfig, load_model_config
from sglr.model.cpu_fused_decode import CpuFusedDecode
from sglr.model.cuda_graph import DecodeCudaGraphs
from sglr.model.cuda_graph_extend import ExtendCudaGraphs
from sglr.model.forward_batch import ExtendRequest, ForwardBatch, IntArrayLike
from sglr.model.kv_cache import KVCache, KVCacheShape, kv_slots_for_memory_fraction
from sglr.model.kv_dtype import kv_attention_backend, kv_storage_dtype, load_kv_scales
from sglr.model.loader import release_freed_heap
from sglr.model.logprobs import TokenLogprobs, score_tokens
from sglr.model.lora.adapter import LoraAdapter
from sglr.model.lora.model_loras import ModelLoras
from sglr.model.lora.peft_loader import load_peft_adapter
from sglr.model.parallel import TensorParallel
from sglr.model.pooling import chunk_parts
from sglr.model.req_to_token import ReqToTokenTable
from sglr.model.runner_config import RunnerConfig
from sglr.model.runner_graphs import ModelSteps, capture_graphs
from sglr.model.weights_policy import (
    load_weights,
    quantized_gguf_source,
    resolve_device,
    resolve_model_dir,
    run_dtype,
)

# After a CPU extend batch of at least this many tokens the freed heap goes back to the OS: its
# activations are tens of MB that glibc would keep for reuse (SmolLM2, 16 prompts of 128 tokens:
# 60 MB), for the price of faulting some of them in again at the next large batch.
_TRIM_AFTER_TOKENS = 512

_CPU_DEFAULT_KV_TOKENS = 65536
_GPU_DEFAULT_MEM_FRACTION = 0.85
_LOGPROB_CHUNK = 512


@dataclass(frozen=True)
class ForwardOutput:
    """next_token_logits: fp32 `[B, V]`, the distribution after each request's last token. With
    CUDA graphs it is a view of the graph's output buffer: use it before the next forward.
    prompt_logprobs: per request, `TokenLogprobs` for the positions asked via
    `ExtendRequest.logprob_start` (scoring the next prompt token at each), else None.
    embedding_parts: per request, its chunk's pooling parts if some asks (`ExtendRequest.embed`)."""

    next_token_logits: torch.Tensor
    prompt_logprobs: list[TokenLogprobs | None]
    embedding_parts: list[tuple[np.ndarray, np.ndarray] | None] | None = None


class ModelRunner:
    """With `tp` (tensor parallelism), this rank's shard of the model and of the KV heads; rank 0
    drives every step (`forward_extend` / `forward_decode` send the batch's recipe to the other
    ranks, which run it in `follow`)."""

    def __init__(self, config: RunnerConfig, tp: TensorParallel | None = None) -> None:
        self.runner_config = config
        self.tp = tp
        self.device = resolve_device(config.device)
        # The Rust CPU kernels' instruction set, checked before anything loads (a bad
        # SGLR_CPU_ISA fails here, not in the first step).
        self.cpu_isa = cpu_isa() if self.device.type == "cpu" else None
        # The GGUF file whose quantized matrices stay quantized, or None (see `RunnerConfig.gguf_weights`).
        quantized_source = quantized_gguf_source(config, tp is not None)
        self.weights_format = "quantized" if quantized_source is not None else "dequantized"
        self.model_dir = resolve_model_dir(config, tp is not None)
        self.config: ModelConfig = load_model_config(self.model_dir)
        self.dtype = run_dtype(config.dtype, self.config, self.device, quantized_source)
        self.max_context_len = config.max_context_len or self.config.max_position_embeddings
        self.model = build_model(self.config, self.dtype, self.device, self.max_context_len, tp)
        load_weights(self.model, config, self.model_dir, quantized_source, tp)
        release_freed_heap()
        num_kv_heads = self.model.model.layers[0].self_attn.num_kv_heads  # this rank's
        kv_dtype = kv_storage_dtype(config, self.dtype)
        shape = KVCacheShape(self.config.num_hidden_layers, num_kv_heads, self.config.head_dim, kv_dtype)
        self.req_to_token = ReqToTokenTable(
            config.max_num_reqs, self.max_context_len, self.device, config.num_draft_rows
        )
        num_slots = self._kv_num_slots(shape)
        if tp is not None:  # slot ids are rank 0's decisions: every rank needs as many slots
            num_slots = tp.min_over_ranks(num_slots)
        self.kv_cache = KVCache(shape, num_slots, self.device)
        load_kv_scales(self.kv_cache, config, self.model_dir)
        self.attn = create_attention_backend(
            kv_attention_backend(config),
            self.kv_cache,
            self.req_to_token.table,
            self.config.head_dim**-0.5,
            without_idle_windows(self.model.attention_variants(), self.max_context_len),
        )
        self.fused_decode = (
            CpuFusedDecode.build(self.model, self.kv_cache, self.req_to_token.table)
            if tp is None and self.device.type == "cpu" and quantized_source is not None
            else None
        )
        self.vocab_size = self.config.vocab_size
        # Usable KV slots; slot ids are `1..num_kv_slots` (0 is padding).
        self.num_kv_slots = self.kv_cache.num_slots
        self.limits = BatchLimits(
            self.vocab_size,
            self.num_kv_slots,
            config.max_num_reqs,
            self.max_context_len,
            config.num_draft_rows,
        )
        # The request-table rows a verify pass gives its draft tokens (see `ReqToTokenTable`).
        self.draft_rows = np.arange(config.max_num_reqs + 1, config.max_num_reqs + 1 + config.num_draft_rows)
        # The loaded LoRA adapters (None: the runner serves the base model alone).
        backend = config.lora_backend
        self.loras = ModelLoras(self.model, self.dtype, self.device, backend) if config.enable_lora else None
        if self.loras is not None and self.fused_decode is not None:
            self.loras.set_listener(self.fused_decode)  # it adds the deltas of decode steps
        for adapter_id, name, path in config.lora_adapters:  # every rank reads them itself
            assert self.loras is not None
            self.loras.load(adapter_id, self.read_lora(name, path))
        self.recipe_hooks: dict[str, Any] = {}  # recipe kinds others run on followers (the KV tier)
        self.cuda_graphs: DecodeCudaGraphs | None
        self.extend_graphs: ExtendCudaGraphs | None
        self.cuda_graphs, self.extend_graphs = capture_graphs(
            config, ModelSteps(self.model, self.attn), self.device, tensor_parallel=tp is not None
        )

    def release_device_memory(self) -> None:
        """Drops the weights, KV cache and captured graphs (the runner is unusable afterwards) and
        hands torch's cached blocks back to the device, for a process that loads another model."""
        for name in (
            "cuda_graphs",
            "extend_graphs",
            "fused_decode",
            "loras",
            "attn",
            "kv_cache",
            "req_to_token",
            "model",
        ):
            setattr(self, name, None)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def extend_batch(self, requests: Sequence[ExtendRequest]) -> ForwardBatch:
        return ForwardBatch.extend(requests, self.device, self.limits)

    def decode_batch(
        self, req_rows: IntArrayLike, input_ids: IntArrayLike, seq_lens: IntArrayLike,
        out_cache_slots: IntArrayLike, row_writes: RowWrites | None = None,
        row_copies: RowCopies | None = None, lora_ids: IntArrayLike | None = None,
    ) -> ForwardBatch:  # fmt: skip
        return ForwardBatch.decode(
            req_rows, input_ids, seq_lens, out_cache_slots, self.device, self.limits, row_writes,
            row_copies, lora_ids,
        )  # fmt: skip

    def forward_extend(self, requests: Sequence[ExtendRequest]) -> ForwardOutput:
        """Builds and runs an extend batch (on every rank under tensor parallelism)."""
        return self._run_recipe(("extend", list(requests)), lead=True)

    def forward_decode(
        self, req_rows: IntArrayLike, input_ids: IntArrayLike, seq_lens: IntArrayLike,
        out_cache_slots: IntArrayLike, row_writes: RowWrites | None = None,
        row_copies: RowCopies | None = None, lora_ids: IntArrayLike | None = None,
        chained: ChainedIds | None = None,
    ) -> ForwardOutput:  # fmt: skip
        """Builds and runs a decode batch (on every rank under tensor parallelism); with
        `row_copies`, a verify pass whose rows are draft-tree nodes; `lora_ids`, each row's
        adapter; `chained`, rows fed ids on the device (one rank only: no other reads them)."""
        arrays = [np.asarray(a, dtype=np.int64) for a in (req_rows, input_ids, seq_lens, out_cache_slots)]
        lora = None if lora_ids is None else np.asarray(lora_ids, dtype=np.int64)
        if chained is None:
            return self._run_recipe(("decode", (*arrays, row_writes, row_copies, lora)), lead=True)
        assert self.tp is None, "chained ids under tensor parallelism"
        batch = self.decode_batch(*arrays, row_writes, row_copies, lora)
        chained.write_into(batch.input_ids)
        return self.forward(batch)

    def load_lora(self, adapter_id: int, name: str, path: str) -> None:
        """Reads the PEFT adapter at `path` (`LoraAdapterError` when it does not fit the model or
        the runner's limits) and loads it as `adapter_id` on every rank."""
        self.pack_lora(adapter_id, self.read_lora(name, path))

    def read_lora(self, name: str, path: str) -> LoraAdapter:
        """The PEFT adapter at `path`, checked against the model and the runner's limits (host
        memory, not loaded)."""
        if self.loras is None:
            raise BatchError("this runner serves no LoRA adapters (enable_lora is off)")
        cfg = self.runner_config
        return load_peft_adapter(name, path, self.config, cfg.max_lora_rank, cfg.lora_target_modules)

    def pack_lora(self, adapter_id: int, adapter: LoraAdapter) -> None:
        """Loads an adapter read by `read_lora` as `adapter_id` on every rank."""
        self._run_recipe(("load_lora", (adapter_id, adapter)), lead=True)

    def unload_lora(self, adapter_id: int) -> None:
        if self.loras is not None:
            self._run_recipe(("unload_lora", adapter_id), lead=True)

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

    def _run_recipe(self, recipe: tuple[str, Any], lead: bool) -> ForwardOutput | None:
        if lead and self.tp is not None:
            with self.tp.recipe_lock:
                self.tp.broadcast_from_first(recipe)
                return self._run_recipe(recipe, lead=False)
        kind, args = recipe
        if kind in self.recipe_hooks:
            return self.recipe_hooks[kind](args)
        if kind in ("load_lora", "unload_lora"):
            assert self.loras is not None
            self.loras.load(*args) if kind == "load_lora" else self.loras.unload(args)
            return None
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
        copies = batch.row_copies
        if copies is not None:
            for src, dst, n in zip(
                copies.src_rows.tolist(), copies.dst_rows.tolist(), copies.lens.tolist(), strict=True
            ):
                table[dst, :n] = table[src, :n]
        if batch.uses_lora:
            # The fused CPU decode step adds the adapters' deltas itself; the decode graphs do
            # not (nor does any other path but the layered one).
            if self.loras is None:
                raise BatchError("a batch with LoRA adapters on a runner without enable_lora")
            if self.fused_decode is not None and self.fused_decode.applies(batch):
                self.loras.check_ids(batch.token_lora_ids)
                return ForwardOutput(self.fused_decode.forward(batch), [None] * batch.batch_size)
            self.loras.begin(batch.token_lora_ids)
            try:
                return self._forward_layered(batch)
            finally:
                self.loras.end()
        graphs = self.cuda_graphs
        if batch.is_decode and graphs is not None and graphs.can_run(batch.batch_size):
            return ForwardOutput(graphs.replay(batch), [None] * batch.batch_size)
        if self.extend_graphs is not None and self.extend_graphs.can_run(batch):
            return ForwardOutput(self.extend_graphs.replay(batch), [None] * batch.batch_size)
        if self.fused_decode is not None and self.fused_decode.applies(batch):
            return ForwardOutput(self.fused_decode.forward(batch), [None] * batch.batch_size)
        return self._forward_layered(batch)

    def _forward_layered(self, batch: ForwardBatch) -> ForwardOutput:
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
        return ForwardOutput(logits, prompt_logprobs, chunk_parts(hidden, batch))

    def _prompt_logprobs(
        self, batch: ForwardBatch, index: int, start: int, hidden: torch.Tensor
    ) -> TokenLogprobs:
        """Scores tokens `start+1 .. seq_len-1` of request `index` from the logits at `start ..`."""
        chunk_start = int(batch.extend_starts_cpu[index])
        first = chunk_start + start - int(batch.prefix_lens_cpu[index])
        end = chunk_start + int(batch.extend_lens_cpu[index]) - 1  # the last scores the unknown next
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
