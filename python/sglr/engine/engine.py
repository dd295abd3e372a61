"""`Engine`: sglr's in-process API. Tokenize, schedule, run, sample, detokenize, stream.

    engine = Engine(model_path=None)              # None: the embedded default model
    out = engine.generate("The capital of France is", {"max_new_tokens": 8, "temperature": 0})
    for chunk in engine.generate(prompt, params, stream=True): print(chunk["text"], end="")
    engine.shutdown()

Results are SGLang-style dicts: `text`, `output_ids`, `meta_info` (`id`, `finish_reason`,
`prompt_tokens`, `completion_tokens`, `cached_tokens`, logprobs when asked). A list prompt, a
list of id lists or `n > 1` gives a list. Streaming yields incremental chunks (`text` and
`output_ids` hold what is new; counts in `meta_info` are cumulative; batch chunks carry
`index`). Bad input raises `sglr.errors.InvalidRequestError` before anything runs.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sglr.engine import delivery
from sglr.engine.assembler import OutputAssembler
from sglr.engine.config import EngineConfig
from sglr.engine.embedding import EmbeddingModel, EncodeMixin
from sglr.engine.images.loading import ImageLimits
from sglr.engine.images.prompt import ImagePrompter
from sglr.engine.io import NormalizedInput, normalize_generate_input
from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits
from sglr.engine.lora_registry import LoraRef, LoraRegistry
from sglr.engine.output import AsyncInbox, AsyncQueueSink, OutputSink, QueueSink
from sglr.engine.request import TokenizedRequest
from sglr.engine.request_builder import RequestBuilder
from sglr.engine.runner_settings import GPU_MAX_RUNNING, runner_config_for
from sglr.engine.scheduler.handle import SchedulerHandle
from sglr.engine.scheduler.loop import SchedulerLoop
from sglr.engine.scheduler.waiting_queue import WaitingRequest
from sglr.engine.session_api import SessionMixin
from sglr.engine.sessions import SessionRegistry
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import EngineClosedError, EngineConfigError

logger = logging.getLogger("sglr.engine")

_CPU_MAX_RUNNING = 64
_CPU_CHUNK = 2048
_GPU_CHUNK = 8192
_LORA_LOAD_TIMEOUT_S = 300.0


class Engine(EncodeMixin, SessionMixin):
    def __init__(self, model_path: str | None = None, **kwargs: Any) -> None:
        cfg = EngineConfig.from_kwargs(model_path=model_path, **kwargs)
        if cfg.node_rank != 0:
            raise EngineConfigError(
                "node_rank > 0 runs only its ranks (sglr.engine.worker.node); node 0 holds the engine"
            )
        self._start(cfg, runner_config_for(cfg))

    @classmethod
    def from_runner(cls, runner: Any, **kwargs: Any) -> Engine:
        """An in-process engine around an already loaded `ModelRunner` (its model, KV cache and
        request table); `kwargs` are the scheduling options (model and memory options come from
        the runner). Shutting the engine down leaves the runner usable."""
        engine = cls.__new__(cls)
        cfg = EngineConfig.from_kwargs(model_path=str(runner.model_dir), **kwargs)
        engine._start(cfg, runner.runner_config, runner)
        return engine

    def _start(self, cfg: EngineConfig, runner_config: Any, runner: Any = None) -> None:
        """Loads the model here (or takes `runner`), or starts the worker processes that do."""
        from sglr.model.config import load_model_config
        from sglr.model.default_model import checkpoint_name
        from sglr.model.parallel import check_tensor_parallel
        from sglr.model.runner import ModelRunner, quantized_gguf_source, resolve_device, resolve_model_dir

        on_gpu = (runner.device if runner is not None else resolve_device(cfg.device)).type == "cuda"
        self._owns_runner = runner is None
        self.max_running_requests = min(
            cfg.max_running_requests or (GPU_MAX_RUNNING if on_gpu else _CPU_MAX_RUNNING),
            runner_config.max_num_reqs,
        )
        chunk = cfg.chunked_prefill_size or (_GPU_CHUNK if on_gpu else _CPU_CHUNK)
        scheduler: SchedulerHandle | None = None
        if runner is None and cfg.uses_workers:
            from sglr.engine.worker.client import WorkerScheduler

            # Resolved once here (a GGUF file is converted once), then loaded by every rank. A
            # quantized GGUF run keeps naming the file: its 4-bit blocks are read from it, and
            # the worker finds the conversion (its dense tensors) in the cache.
            tensor_parallel = cfg.tp_size > 1
            model_dir = resolve_model_dir(runner_config, tensor_parallel)
            keeps_gguf = quantized_gguf_source(runner_config, tensor_parallel) is not None
            resolved = (
                runner_config if keeps_gguf else dataclasses.replace(runner_config, model_path=model_dir)
            )
            check_tensor_parallel(load_model_config(model_dir), cfg.tp_size)
            # The front's tokenizer (importing transformers takes ~2 s) loads while the workers
            # start and load the model: both wait otherwise.
            with ThreadPoolExecutor(1, thread_name_prefix="sglr-tokenizer") as pool:
                tokenizer_load = pool.submit(EngineTokenizer, model_dir, cfg.chat_template)
                workers = WorkerScheduler(
                    cfg, resolved, self.max_running_requests, chunk, cfg.worker_start_timeout_s
                )
                tokenizer = tokenizer_load.result()
            runner = workers.runner_info
            scheduler = workers
        else:
            if runner is None:
                runner = ModelRunner(runner_config)
            tokenizer = EngineTokenizer(runner.model_dir, cfg.chat_template)
        self.config = cfg
        self.runner = runner  # in worker mode, a `RunnerInfo` with the same attributes
        self.tokenizer = tokenizer
        self.model_path = str(cfg.model_path) if cfg.model_path else str(runner.model_dir)
        # The checkpoint's readable name, not a path (the path stays accepted: `model_path`).
        self.served_model_name = cfg.served_model_name or checkpoint_name(cfg.model_path)
        self.context_len = runner.max_context_len
        self.embedding_model = EmbeddingModel.of(runner.model_dir) if cfg.is_embedding else None
        self._builder = RequestBuilder(
            self.tokenizer,
            runner.vocab_size,
            self.context_len,
            runner.num_kv_slots,
            _image_prompter(runner.model_dir, runner.vocab_size, cfg),
            LoraRegistry(runner_config.lora_adapters, runner_config.enable_lora, cfg.max_loaded_loras),
            cfg.priority_policy,
            SessionRegistry(abort=lambda rid: self._scheduler.abort(rid)),
        )
        if scheduler is None:
            loop = SchedulerLoop(
                cfg,
                runner,
                self.tokenizer,
                max_running_requests=self.max_running_requests,
                chunked_prefill_size=chunk,
            )
            loop.start()
            scheduler = loop
        self._scheduler: SchedulerHandle = scheduler
        self._closed = False
        logger.info(
            "engine ready: model %s, %d KV slots, device %s%s",
            self.model_path,
            runner.num_kv_slots,
            runner.device,
            f", {cfg.tp_size} worker process(es)" if cfg.uses_workers else "",
        )

    # ----- generation -----

    def generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        return_logprob: bool | list[bool] | None = None,
        logprob_start_len: int | list[int] | None = None,
        top_logprobs_num: int | list[int] | None = None,
        return_text_in_logprobs: bool = False,
        stream: bool = False,
        rid: str | list[str] | None = None,
        namespace: str | None = None,
        image_data: Any = None,
        video_data: Any = None,
        lora_path: str | list[str | None] | None = None,
        priority: int | list[int | None] | None = None,
        session_params: dict[str, Any] | None = None,
    ) -> dict[str, Any] | list[dict[str, Any]] | Iterator[dict[str, Any]]:
        self.check_generates()
        batch = _normalize(locals())
        requests, assemblers = self._prepare(batch)
        sinks = [QueueSink() for _ in requests]
        self._submit(requests, sinks)
        if stream:
            return delivery.stream(self._scheduler, sinks, assemblers, batch.is_batch)
        results = [
            delivery.wait_result(self._scheduler, sink, assembler)
            for sink, assembler in zip(sinks, assemblers, strict=True)
        ]
        return results if batch.is_batch else results[0]

    async def async_generate(
        self, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | list[dict[str, Any]] | AsyncIterator[dict[str, Any]]:
        """`generate` for asyncio callers, with the same arguments; cancelling the call aborts
        the sequences that have not finished."""
        self.check_generates()
        call = _generate_signature().bind(self, *args, **kwargs)
        call.apply_defaults()
        batch = _normalize(call.arguments)
        requests, assemblers = self._prepare(batch)
        outputs = AsyncInbox()
        self._submit(requests, [AsyncQueueSink(outputs, index) for index in range(len(requests))])
        if call.arguments["stream"]:
            deltas = delivery.async_stream(self._scheduler, outputs, assemblers, batch.is_batch)
            return delivery.DeltaStream(deltas, [a.num_prompt_tokens for a in assemblers])
        results = await delivery.async_results(self._scheduler, outputs, assemblers)
        return results if batch.is_batch else results[0]

    def check_prompt_text(self, text: str, field: str) -> None:
        """Refuses (`LimitExceededError` naming `field`) a text too long to fit the context
        whatever it tokenizes to, before anything tokenizes it (a rendered chat, say)."""
        self._builder.check_prompt_text(text, field)

    def abort(self, rid: str) -> None:
        """Ends request `rid` early; its result arrives with finish_reason type "abort"."""
        self._scheduler.abort(rid)

    def flush_cache(self) -> bool:
        """Empties the prefix cache; False (nothing done) while requests are in flight."""
        self._check_open()
        return self._scheduler.flush_cache().result(timeout=60)

    def get_stats(self) -> dict[str, Any]:
        return self._scheduler.get_stats()

    def get_tree_summary(self, limits: TreeSummaryLimits | None = None) -> TreeSummary:
        """The prefix cache's most reused prefixes, bounded (`engine/kv/tree_summary.py`)."""
        return self._scheduler.get_tree_summary(limits or TreeSummaryLimits())

    # ----- LoRA adapters -----

    def load_lora_adapter(self, lora_name: str, lora_path: str) -> LoraRef:
        """Loads the PEFT adapter at `lora_path` as `lora_name` (while requests run); requests
        name it from when this returns. Raises `LoraAdapterError` (bad adapter, name taken) or
        `LoraCapacityError` (`max_loaded_loras` reached)."""
        self._check_open()
        loras = self._builder.loras
        ref = loras.reserve(lora_name, lora_path)
        try:
            self._scheduler.load_lora(ref.lora_id, ref.name, ref.path).result(timeout=_LORA_LOAD_TIMEOUT_S)
        except BaseException:
            loras.cancel(ref)
            raise
        loras.commit(ref)
        logger.info("LoRA adapter %r loaded from %s (id %d)", ref.name, ref.path, ref.lora_id)
        return ref

    def unload_lora_adapter(self, lora_name: str) -> None:
        """Forgets `lora_name` at once (new requests for it are refused); its weights go when its
        requests in flight have ended. Raises `UnknownLoraError` when it is not loaded."""
        self._check_open()
        ref = self._builder.loras.remove(lora_name)
        self._scheduler.unload_lora(ref.lora_id).result(timeout=_LORA_LOAD_TIMEOUT_S)
        logger.info("LoRA adapter %r unloaded (id %d)", ref.name, ref.lora_id)

    def lora_adapters(self) -> list[LoraRef]:
        """The adapters requests may name, in load order."""
        return self._builder.loras.adapters()

    @property
    def takes_images(self) -> bool:
        """Whether the model reads images (`image_data`)."""
        return self._builder.image_prompter is not None

    @property
    def takes_videos(self) -> bool:
        """Whether the model reads videos (`video_data`)."""
        prompter = self._builder.image_prompter
        return prompter is not None and prompter.takes_videos

    @property
    def is_alive(self) -> bool:
        """Accepting requests: not shut down, and the scheduler loop is running."""
        return not self._closed and self._scheduler.is_alive

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes (empty for the in-process engine)."""
        return self._scheduler.worker_pids

    def get_waiting_queue(self, limit: int = 20) -> list[WaitingRequest]:
        """The first `limit` waiting requests in admission order, read between steps."""
        return self._scheduler.get_waiting_queue(limit).result(timeout=60)

    def check_invariants(self) -> None:
        """KV and scheduler accounting (raises on any leak)."""
        self._scheduler.check_invariants()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._scheduler.stop()
        release = getattr(self.runner, "release_device_memory", None)
        if self._owns_runner and release is not None and not self._scheduler.is_alive:
            # The weights and KV cache go now, not when the last reference to this object does:
            # a process that starts another engine on the same GPU needs that memory.
            release()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # ----- internals -----

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("the engine has been shut down")
        if not self._scheduler.is_alive:
            raise EngineClosedError(f"the engine's scheduler loop stopped: {self._scheduler.fatal_error}")

    def _prepare(self, batch: NormalizedInput) -> tuple[list[TokenizedRequest], list[OutputAssembler]]:
        """Validates and tokenizes every sequence first: a bad item rejects the whole batch."""
        self._check_open()
        built = [self._builder.build(spec) for spec in batch.specs]
        return [request for request, _ in built], [assembler for _, assembler in built]

    def _submit(self, requests: list[TokenizedRequest], sinks: list[OutputSink]) -> None:
        for request, sink in zip(requests, sinks, strict=True):
            self._scheduler.submit(request, sink)


def _image_prompter(model_dir: Any, vocab_size: int, cfg: EngineConfig) -> ImagePrompter | None:
    """The front's image reader and placer, for a model that takes images."""
    from sglr.model.config import load_model_config

    config = load_model_config(model_dir)
    if config.vision is None:
        return None
    limits = ImageLimits(
        cfg.max_images_per_request,
        cfg.max_image_bytes,
        cfg.max_image_pixels,
        cfg.max_video_frames,
        cfg.video_num_frames,
    )
    return ImagePrompter(model_dir, config.vision, vocab_size, config.bos_token_id, limits)


@functools.cache
def _generate_signature() -> inspect.Signature:
    # Once, not per call: building a signature costs more than the rest of the call's checks.
    return inspect.signature(Engine.generate)


def _normalize(call: Mapping[str, Any]) -> NormalizedInput:
    """`generate`'s arguments as one spec per sequence."""
    return normalize_generate_input(
        call["prompt"], call["input_ids"], call["sampling_params"], call["rid"], call["return_logprob"],
        call["logprob_start_len"], call["top_logprobs_num"], call["return_text_in_logprobs"], call["namespace"],
        call.get("image_data"), call.get("video_data"), call.get("lora_path"), call.get("priority"),
        call.get("session_params"),
    )  # fmt: skip
