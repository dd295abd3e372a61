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

import asyncio
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from sglr.engine.config import EngineConfig
from sglr.engine.detokenizer import IncrementalDetokenizer
from sglr.engine.finish import FinishAbort
from sglr.engine.io import NormalizedInput, SequenceSpec, normalize_generate_input
from sglr.engine.loop import SchedulerLoop
from sglr.engine.output import AsyncQueueSink, OutputSink, QueueSink, StreamEvent, merge_deltas
from sglr.engine.request import LogprobRecord, Phase, Req
from sglr.engine.stop_strings import StopStringMatcher
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import EngineClosedError, InvalidRequestError

logger = logging.getLogger("sglr.engine")

_CPU_MAX_RUNNING = 64
_GPU_MAX_RUNNING = 256
_CPU_CHUNK = 2048
_GPU_CHUNK = 8192


class Engine:
    def __init__(self, model_path: str | None = None, **kwargs: Any) -> None:
        from sglr.model.runner import ModelRunner, RunnerConfig

        self.config = EngineConfig.from_kwargs(model_path=model_path, **kwargs)
        cfg = self.config
        runner_config = RunnerConfig(
            model_path=cfg.model_path,
            dtype=cfg.dtype,
            device=cfg.device,
            kv_num_tokens=cfg.max_total_tokens,
            mem_fraction=cfg.mem_fraction_static,
            max_context_len=cfg.context_length,
            attention_backend=cfg.attention_backend,
            load_format=cfg.load_format,
            seed=cfg.seed,
            cuda_graph_max_bs=cfg.cuda_graph_max_bs,
            max_num_reqs=(cfg.max_running_requests or _GPU_MAX_RUNNING) + 2,
        )
        self.runner = ModelRunner(runner_config)
        on_gpu = self.runner.device.type == "cuda"
        self.max_running_requests = cfg.max_running_requests or (
            _GPU_MAX_RUNNING if on_gpu else _CPU_MAX_RUNNING
        )
        chunk = cfg.chunked_prefill_size or (_GPU_CHUNK if on_gpu else _CPU_CHUNK)
        self.tokenizer = EngineTokenizer(self.runner.model_dir, cfg.chat_template)
        self.model_path = str(cfg.model_path) if cfg.model_path else str(self.runner.model_dir)
        self.served_model_name = cfg.served_model_name or self.model_path
        self.context_len = self.runner.max_context_len
        self._constraint_compiler: Any = None  # built on the first constrained request
        self._constraint_lock = threading.Lock()
        self._loop = SchedulerLoop(
            cfg,
            self.runner,
            self.tokenizer,
            max_running_requests=self.max_running_requests,
            chunked_prefill_size=chunk,
            jump_forward=None if cfg.disable_jump_forward else self._jump_forward,
        )
        self._compile_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sglr-compile")
        self._uids = itertools.count(1)
        self._uid_lock = threading.Lock()
        self._closed = False
        self._loop.start()
        logger.info(
            "engine ready: model %s, %d KV slots, device %s",
            self.model_path,
            self.runner.num_kv_slots,
            self.runner.device,
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
    ) -> dict[str, Any] | list[dict[str, Any]] | Iterator[dict[str, Any]]:
        batch = normalize_generate_input(
            prompt, input_ids, sampling_params, rid, return_logprob, logprob_start_len, top_logprobs_num,
            return_text_in_logprobs, namespace,
        )  # fmt: skip
        sinks = [QueueSink(wants_stream=stream) for _ in batch.specs]
        self._submit(batch, sinks)
        if stream:
            return self._stream(batch, sinks)
        results = [self._wait_result(sink) for sink in sinks]
        return results if batch.is_batch else results[0]

    async def async_generate(
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
    ) -> dict[str, Any] | list[dict[str, Any]] | AsyncIterator[dict[str, Any]]:
        batch = normalize_generate_input(
            prompt, input_ids, sampling_params, rid, return_logprob, logprob_start_len, top_logprobs_num,
            return_text_in_logprobs, namespace,
        )  # fmt: skip
        if stream:
            shared: asyncio.Queue[tuple[int, StreamEvent]] = asyncio.Queue()
            stream_sinks = [AsyncQueueSink(True, shared=shared, index=i) for i in range(len(batch.specs))]
            self._submit(batch, stream_sinks)
            return self._async_stream(batch, shared)
        sinks = [AsyncQueueSink(wants_stream=False) for _ in batch.specs]
        self._submit(batch, sinks)
        results = []
        try:
            for sink in sinks:
                results.append(await self._async_wait_result(sink))
        except BaseException:  # cancelled (e.g. the HTTP client went away): stop the work too
            self._abort_unfinished(batch, num_done=len(results))
            raise
        return results if batch.is_batch else results[0]

    def abort(self, rid: str) -> None:
        """Ends request `rid` early; its result arrives with finish_reason type "abort"."""
        self._loop.abort(rid)

    def flush_cache(self) -> bool:
        """Empties the prefix cache; False (nothing done) while requests are in flight."""
        self._check_open()
        return self._loop.flush_cache().result(timeout=60)

    def get_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self._loop.stats.as_dict()
        cache = self._loop.cache
        stats.update(
            num_running_requests=self._loop.num_running,
            num_waiting_requests=self._loop.num_waiting,
            num_kv_slots=self.runner.num_kv_slots,
            num_free_kv_slots=cache.allocator.num_free,
            num_cached_kv_slots=cache.tree.total_size(),
            kv_usage=1.0 - cache.allocator.num_free / self.runner.num_kv_slots,
            constraint_cache_hits=self._constraint_compiler.num_hits if self._constraint_compiler else 0,
        )
        return stats

    @property
    def is_alive(self) -> bool:
        """Accepting requests: not shut down, and the scheduler loop is running."""
        return not self._closed and self._loop.is_alive

    def check_invariants(self) -> None:
        """Slot accounting; only meaningful while no request is in flight (tests call it)."""
        self._loop.check_invariants()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.stop()
        self._compile_pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # ----- internals -----

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("the engine has been shut down")
        if not self._loop.is_alive:
            raise EngineClosedError(f"the engine's scheduler loop stopped: {self._loop.fatal_error}")

    def _submit(self, batch: NormalizedInput, sinks: list[OutputSink]) -> None:
        self._check_open()
        reqs = [self._make_req(spec, sink) for spec, sink in zip(batch.specs, sinks, strict=True)]
        for req in reqs:  # validated as a whole first: a bad item rejects the batch
            compiling = req.spec.params.has_constraint
            if compiling:
                req.phase = Phase.COMPILING
            # The loop must see "add" before "constraint_ready" (its inbox is FIFO): a compile
            # that finishes first (a cache hit) would otherwise be taken for an aborted request
            # and the request would never be scheduled.
            self._loop.submit(req)
            if compiling:
                self._compile_pool.submit(self._compile_constraint, req)

    def _make_req(self, spec: SequenceSpec, sink: OutputSink) -> Req:
        params = spec.params
        ids = self.tokenizer.encode(spec.text) if spec.text is not None else list(spec.input_ids)
        prompt_field = "text" if spec.text is not None else "input_ids"
        if not ids:
            raise InvalidRequestError("The prompt is empty after tokenization.", param=prompt_field)
        vocab = self.runner.vocab_size
        # Checked before the int32 conversion, which would overflow on huge ids.
        if min(ids) < 0 or max(ids) >= vocab:
            raise InvalidRequestError(f"input_ids must be in [0, {vocab - 1}].", param="input_ids")
        prompt_ids = np.asarray(ids, dtype=np.int32)
        params.verify_vocab(vocab)
        prompt_len = int(prompt_ids.size)
        if prompt_len >= self.context_len:
            raise InvalidRequestError(
                f"The input ({prompt_len} tokens) is longer than the model's context length ({self.context_len} tokens).",
                param=prompt_field,
            )
        max_new = params.max_new_tokens
        if max_new is None:
            max_new = self.context_len - prompt_len
        elif prompt_len + max_new > self.context_len:
            raise InvalidRequestError(
                f"Requested token count exceeds the model's maximum context length of {self.context_len} tokens. "
                f"You requested a total of {prompt_len + max_new} tokens: {prompt_len} tokens from the input "
                f"messages and {max_new} tokens for the completion. Please reduce the number of tokens in the "
                "input messages or the completion to fit within the limit.",
                param="sampling_params.max_new_tokens",
            )
        if prompt_len + 1 > self.runner.num_kv_slots:
            raise InvalidRequestError(
                f"The input ({prompt_len} tokens) does not fit the KV cache ({self.runner.num_kv_slots} tokens).",
                param=prompt_field,
            )
        stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            stop_ids |= self.tokenizer.eos_token_ids
        with self._uid_lock:
            uid = next(self._uids)
        return Req(
            uid=uid,
            spec=spec,
            prompt_ids=prompt_ids,
            max_new_tokens=max_new,
            stop_token_ids=frozenset(stop_ids),
            sink=sink,
            detokenizer=IncrementalDetokenizer(self.tokenizer, ids, params.skip_special_tokens),
            stop_matcher=StopStringMatcher(params.stop, params.stop_regex),
            logprobs=LogprobRecord() if spec.return_logprob else None,
        )

    def _constraints(self) -> Any:
        with self._constraint_lock:
            if self._constraint_compiler is None:
                from sglr.engine.constraint_state import ConstraintCompiler

                self._constraint_compiler = ConstraintCompiler(self.tokenizer, self.runner.vocab_size)
            return self._constraint_compiler

    def _jump_forward(self, req: Req, sampled_id: int) -> list[int] | None:
        return self._constraints().jump_forward(req, sampled_id)

    def _compile_constraint(self, req: Req) -> None:
        try:
            req.constraint = self._constraints().compile(req.spec.params)
        except InvalidRequestError as exc:
            req.finish_reason = FinishAbort(exc)
            req.phase = Phase.FINISHED
        except Exception as exc:  # never let a compile failure hang the request
            logger.exception("constraint compilation failed")
            req.finish_reason = FinishAbort(InvalidRequestError(f"constraint error: {exc}"))
            req.phase = Phase.FINISHED
        self._loop.notify_constraint_ready(req)

    def _abort_unfinished(self, batch: NormalizedInput, num_done: int) -> None:
        self._abort_rids(spec.rid for spec in batch.specs[num_done:])

    def _abort_rids(self, rids: Iterable[str]) -> None:
        # Aborting a request that has just finished is a no-op in the loop.
        for rid in rids:
            self._loop.abort(rid)

    def _wait_result(self, sink: QueueSink) -> dict[str, Any]:
        while True:
            event = self._get_event(sink)
            if event.result is not None:
                return event.result
            if event.error is not None:
                raise event.error

    def _get_event(self, sink: QueueSink) -> StreamEvent:
        while True:
            try:
                return sink.get(timeout=1.0)
            except Exception:
                if not self._loop.is_alive and sink.queue.empty():
                    raise EngineClosedError(f"the engine stopped: {self._loop.fatal_error}") from None

    def _stream(self, batch: NormalizedInput, sinks: list[QueueSink]) -> Iterator[dict[str, Any]]:
        pending = dict(enumerate(sinks))
        try:
            while pending:
                for index, sink in list(pending.items()):
                    try:
                        event = sink.get(timeout=0.001 if len(pending) > 1 else 1.0)
                    except Exception:
                        if not self._loop.is_alive and sink.queue.empty():
                            raise EngineClosedError(f"the engine stopped: {self._loop.fatal_error}") from None
                        continue
                    if event.error is not None:
                        raise event.error
                    if event.delta is not None:
                        yield _with_index(event.delta, index, batch.is_batch)
                    if event.result is not None:
                        del pending[index]
        finally:  # the caller stopped reading early: abort what is still running
            self._abort_rids(batch.specs[index].rid for index in pending)

    async def _async_wait_result(self, sink: AsyncQueueSink) -> dict[str, Any]:
        while True:
            event = await sink.get()
            if event.result is not None:
                return event.result
            if event.error is not None:
                raise event.error

    async def _async_stream(
        self, batch: NormalizedInput, events: asyncio.Queue[tuple[int, StreamEvent]]
    ) -> AsyncIterator[dict[str, Any]]:
        unfinished = set(range(len(batch.specs)))
        try:
            while unfinished:
                arrived = [await events.get()]
                while not events.empty():
                    arrived.append(events.get_nowait())
                # NOTE: a reader that fell behind gets one chunk per sequence for everything that
                # has arrived, not one per token: under load this keeps the per-token cost of
                # streaming (events, HTTP writes) from growing with the backlog.
                merged: dict[int, dict[str, Any]] = {}
                for index, event in arrived:
                    if event.error is not None:
                        raise event.error
                    if event.delta is not None:
                        earlier = merged.get(index)
                        merged[index] = event.delta if earlier is None else merge_deltas(earlier, event.delta)
                    if event.result is not None:
                        unfinished.discard(index)
                for index, delta in merged.items():
                    yield _with_index(delta, index, batch.is_batch)
        finally:
            # Closed or cancelled before the end (a client that went away): free the slots now
            # instead of generating for nobody until max_new_tokens.
            self._abort_rids(batch.specs[index].rid for index in unfinished)


def _with_index(delta: dict[str, Any], index: int, is_batch: bool) -> dict[str, Any]:
    if is_batch:
        delta = dict(delta, index=index)
    return delta
