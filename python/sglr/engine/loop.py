"""`SchedulerLoop`: the engine's one thread that owns all request and KV state.

Each step: take new requests and aborts from the inbox; ask the Rust scheduler which waiting
requests to admit (cache-aware, budgeted); run one extend batch (admissions, prompt chunks,
jump-forward runs); run one decode batch for everything else that is generating; publish
results. When decode runs out of KV slots, the newest requests are retracted: their computed
KV goes to the prefix cache and they wait again at the head of the queue, so re-admission is
mostly a cache hit. Callers talk to it only through `submit`, `abort`, `flush_cache`, `stop`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from sglr._core import Scheduler
from sglr.engine.batch_executor import BatchExecutor, ExtendItem, SampledToken
from sglr.engine.config import EngineConfig
from sglr.engine.finish import FinishStop
from sglr.engine.kv_manager import KVManager
from sglr.engine.kv_slots import KVSlotAllocator
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.prefix_cache import NullPrefixCache, RadixPrefixCache
from sglr.engine.request import Phase, Req
from sglr.engine.stats import EngineStats
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import (
    EngineClosedError,
    EngineInternalError,
    InvalidRequestError,
    RequestAbortedError,
    SglrError,
)
from sglr.model.runner import ModelRunner

logger = logging.getLogger("sglr.engine")

# Sleep while requests wait for memory that only other waiting work can free.
_IDLE_WAIT_S = 0.002


class SchedulerLoop:
    def __init__(
        self,
        config: EngineConfig,
        runner: ModelRunner,
        tokenizer: EngineTokenizer,
        max_running_requests: int,
        chunked_prefill_size: int,
        jump_forward: Callable[[Req, int], list[int] | None] | None = None,
    ) -> None:
        self.config = config
        self.runner = runner
        self.context_len = runner.max_context_len
        allocator = KVSlotAllocator(runner.num_kv_slots)
        cache = NullPrefixCache(allocator) if config.disable_radix_cache else RadixPrefixCache(allocator)
        self.cache = cache
        self.kv = KVManager(cache, runner.req_to_token)
        self.scheduler = Scheduler(
            config.schedule_policy,
            max_prefill_tokens=chunked_prefill_size,
            max_running_requests=max_running_requests,
            starvation_guard=config.starvation_guard,
            max_wait_s=config.max_wait_s,
            max_request_tokens=self.context_len,
            seed=config.seed,
        )
        self.executor = BatchExecutor(runner)
        self.out = OutputProcessor(tokenizer, self.context_len)
        self.jump_forward = jump_forward
        self.stats = EngineStats()
        self.reqs: dict[int, Req] = {}  # every request not finished yet, by uid
        self.uid_by_rid: dict[str, int] = {}
        self.decoding: list[Req] = []
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stopping = False
        # Slots taken this step but not yet recorded on a request (freed if the step fails).
        self._unrecorded_slots: list[np.ndarray] = []
        self.fatal_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sglr-scheduler", daemon=True)

    # ----- caller side (any thread) -----

    def start(self) -> None:
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, req: Req) -> None:
        self._inbox.put(("add", req))

    def abort(self, rid: str) -> None:
        self._inbox.put(("abort", rid))

    def flush_cache(self) -> Future[bool]:
        future: Future[bool] = Future()
        self._inbox.put(("flush", future))
        return future

    def stop(self, timeout: float | None = 30.0) -> None:
        self._inbox.put(("stop", None))
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler)

    @property
    def num_running(self) -> int:
        return len(self.decoding)

    # ----- the loop thread -----

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._drain_inbox(block=not self._has_work())
                if self._stopping:
                    break
                if self._has_work():
                    self._step_isolated()
        except BaseException as exc:  # a bug in the loop itself: fail everything, never hang
            logger.exception("scheduler loop died")
            self.fatal_error = exc
        finally:
            self._fail_all(
                "the engine is shutting down"
                if self.fatal_error is None
                else f"engine error: {self.fatal_error}"
            )

    def _has_work(self) -> bool:
        return bool(self.decoding) or len(self.scheduler) > 0

    def _drain_inbox(self, block: bool) -> None:
        while True:
            try:
                command, payload = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            if command == "add":
                self._add(payload)
            elif command == "abort":
                self._abort(payload, RequestAbortedError("aborted by the client"))
            elif command == "flush":
                payload.set_result(self._flush())
            elif command == "constraint_ready":
                self._enqueue(payload)
            elif command == "stop":
                self._stopping = True
                return

    def _add(self, req: Req) -> None:
        self.reqs[req.uid] = req
        self.uid_by_rid[req.rid] = req.uid
        self.stats.num_requests += 1
        if req.phase is Phase.FINISHED:  # failed before reaching the loop (e.g. bad constraint)
            self._finish(req)
        elif req.phase is not Phase.COMPILING:
            self._enqueue(req)

    def notify_constraint_ready(self, req: Req) -> None:
        """Called from a compile thread when the request's constraint is ready (or failed)."""
        self._inbox.put(("constraint_ready", req))

    def _enqueue(self, req: Req) -> None:
        if req.uid not in self.reqs:
            return  # aborted while compiling
        if req.phase is Phase.FINISHED:
            self._finish(req)
            return
        req.phase = Phase.WAITING
        self.scheduler.add_request(
            req.uid,
            req.prompt_ids,
            req.max_new_tokens,
            req.spec.namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=self._max_prefix_len(req),
        )

    def _max_prefix_len(self, req: Req) -> int | None:
        # Positions whose prompt logprobs are asked for must be computed, not taken from cache.
        if req.spec.return_logprob and req.spec.logprob_start_len >= 0 and not req.has_prefilled:
            return self._logprob_start(req)
        return None

    def _logprob_start(self, req: Req) -> int:
        return min(req.spec.logprob_start_len, req.prompt_len - 1)

    def _step_isolated(self) -> None:
        """One step; an unexpected error fails the requests in flight, not the engine."""
        started = time.monotonic()
        try:
            progressed = self._step()
        except Exception as exc:
            logger.exception("engine step failed; aborting the requests in flight")
            for slots in self._unrecorded_slots:
                self.cache.allocator.free(slots)
            self._unrecorded_slots.clear()
            for req in list(self.reqs.values()):
                if req.row is not None or req.phase is Phase.PREFILLING:
                    self._abort(
                        req.rid, EngineInternalError(f"internal error while running the request: {exc}")
                    )
            progressed = True
        self.stats.busy_seconds += time.monotonic() - started
        if self.config.debug_invariants:
            self.check_invariants()
        if not progressed:
            time.sleep(_IDLE_WAIT_S)

    def _step(self) -> bool:
        running_left = np.array([req.tokens_left for req in self.decoding], dtype=np.int32)
        decision = self.scheduler.select(self.cache.tree, self.kv.num_free_slots, running_left)
        self.cache.allocator.free(decision.evicted_slots)
        items = self._admit(decision)
        items += self._jump_forward_items()
        extended = {item.req.uid for item in items}
        if items:
            self._run_extend(items)
        decoding = [req for req in self.decoding if req.uid not in extended and req.finish_reason is None]
        if decoding:
            self._run_decode(decoding)
        elif not items and decision.stop_reason == "memory" and not self.decoding:
            self._abort_unfittable()
            return False
        return bool(items or decoding)

    def _admit(self, decision: Any) -> list[ExtendItem]:
        items = []
        for i, admission in enumerate(decision.admitted):
            req = self.reqs[admission.rid]
            if not admission.is_continuation:
                if not self.kv.admit(req, decision.prefix_slots_of(i), admission.node):
                    self.cache.unlock(admission.node)
                    self.scheduler.remove(req.uid)
                    self._requeue(req)
                    continue
                self.stats.num_prompt_tokens += req.prompt_len if not req.has_prefilled else 0
                if not req.has_prefilled:
                    self.stats.num_cached_prompt_tokens += req.cached_tokens or 0
                req.phase = Phase.PREFILLING
            assert req.num_computed == admission.prefix_len, "scheduler and engine disagree on progress"
            new_slots = self.kv.try_alloc(admission.extend_len)
            if new_slots is None:
                raise RuntimeError("the scheduler admitted more prefill than the KV pool holds")
            self._unrecorded_slots.append(new_slots)
            score_from = None
            if req.spec.return_logprob and req.spec.logprob_start_len >= 0 and not req.has_prefilled:
                score_from = self._logprob_start(req)
            items.append(
                ExtendItem(
                    req,
                    admission.prefix_len,
                    new_slots,
                    sample=admission.is_prompt_done,
                    score_from=score_from,
                )
            )
        return items

    def _jump_forward_items(self) -> list[ExtendItem]:
        """Decoding requests whose constraint forced several tokens: run them as one extend."""
        items = []
        for req in self.decoding:
            pending = req.fill_len - req.num_computed
            if pending > 1 and req.finish_reason is None:
                new_slots = self.kv.try_alloc(pending)
                if new_slots is None:
                    continue  # no room now; the tokens run one per decode step instead
                self._unrecorded_slots.append(new_slots)
                items.append(ExtendItem(req, req.num_computed, new_slots, sample=True))
        return items

    def _run_extend(self, items: list[ExtendItem]) -> None:
        outcome = self.executor.extend(items)
        self.stats.num_extend_passes += 1
        self.stats.num_extend_tokens += sum(int(item.new_slots.size) for item in items)
        self.stats.num_extend_seqs += len(items)
        for item in items:
            self.kv.add_computed(item.req, item.new_slots)
        self._unrecorded_slots.clear()
        for item in items:
            req = item.req
            if item.score_from is not None:
                self._record_prompt_scores(req, item, outcome.prompt_scores.get(req.uid))
            if not item.sample:
                self.kv.share_progress(req)  # a prompt chunk: later chunks and others reuse it
                continue
            first_prefill = not req.has_prefilled
            req.has_prefilled = True
            if first_prefill or req.phase is Phase.PREFILLING:
                self.kv.share_progress(req)
                if req not in self.decoding:
                    self.decoding.append(req)
                req.phase = Phase.DECODING
            if first_prefill and req.max_new_tokens == 0:
                self.out.finish_without_output(req)
                self._finish(req)
                continue
            self._accept(req, outcome.sampled[req.uid])

    def _record_prompt_scores(self, req: Req, item: ExtendItem, scores: Any) -> None:
        record = req.logprobs
        assert record is not None
        if not record.input_token_logprobs:
            start = item.score_from
            record.input_token_logprobs.append((None, int(req.prompt_ids[start])))
            record.input_top_logprobs.append(None)
        if scores is not None:
            entries, tops = scores
            record.input_token_logprobs.extend(entries)
            record.input_top_logprobs.extend(tops)

    def _run_decode(self, reqs: list[Req]) -> None:
        reqs, new_slots = self._reserve_decode_slots(reqs)
        if not reqs:
            return
        self._unrecorded_slots.append(new_slots)
        sampled = self.executor.decode(reqs, new_slots)
        self.stats.num_decode_passes += 1
        self.stats.num_decode_seqs += len(reqs)
        self.stats.max_decode_batch_size = max(self.stats.max_decode_batch_size, len(reqs))
        for i, req in enumerate(reqs):
            self.kv.add_computed(req, new_slots[i : i + 1])
        self._unrecorded_slots.clear()
        for req, token in zip(reqs, sampled, strict=True):
            self._accept(req, token)
        self.scheduler.decay_new_token_ratio()

    def _reserve_decode_slots(self, reqs: list[Req]) -> tuple[list[Req], np.ndarray]:
        """One slot per request; when the pool is short, retract the newest requests."""
        reqs = sorted(reqs, key=lambda r: r.arrival_time)
        while reqs:
            slots = self.kv.try_alloc(len(reqs))
            if slots is not None:
                return reqs, slots
            victim = reqs.pop()
            self._retract(victim)
        return [], np.zeros(0, dtype=np.int32)

    def _retract(self, req: Req) -> None:
        self.kv.release(req, keep_kv=True)
        self.decoding.remove(req)
        req.num_retractions += 1
        self.stats.num_retractions += 1
        self._requeue(req)
        decoded = sum(len(r.output_ids) for r in self.decoding)
        max_new = sum(r.max_new_tokens for r in self.decoding)
        self.scheduler.on_retract(decoded, max_new, len(self.decoding))

    def _requeue(self, req: Req) -> None:
        req.phase = Phase.WAITING
        self.scheduler.requeue(
            req.uid,
            req.fill_ids(),
            max(req.tokens_left, 1),
            req.spec.namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=self._max_prefix_len(req),
        )

    def _accept(self, req: Req, token: SampledToken) -> None:
        """Applies a sampled token: logprobs, constraint, jump-forward, finish checks, publish."""
        if req.logprobs is not None and token.logprob is not None:
            req.logprobs.output_token_logprobs.append((token.logprob, token.token_id))
            req.logprobs.output_top_logprobs.append(token.top)
        token_ids = [token.token_id]
        if req.constraint is not None:
            if not req.constraint.advance(token.token_id):
                self.out.mark_aborted(
                    req, EngineInternalError("the sampled token violates the output constraint")
                )
                self._finish(req)
                return
            # Jump-forward tokens have no sampled logprobs, so requests that want them step.
            if self.jump_forward is not None and req.logprobs is None:
                token_ids = self.jump_forward(req, token.token_id) or token_ids
        for token_id in token_ids:
            self.out.append_token(req, token_id)
            self.stats.num_generated_tokens += 1
            if req.finish_reason is not None:
                break
        self.stats.num_jump_forward_tokens += len(token_ids) - 1
        if req.finish_reason is None and req.constraint is not None and req.constraint.is_complete:
            # The constraint took EOS: nothing may follow, even with ignore_eos.
            req.finish_reason = FinishStop(token_ids[-1])
        if req.finish_reason is not None:
            self._finish(req)
        else:
            self.out.publish(req)

    def _finish(self, req: Req) -> None:
        if req.row is not None:
            self.kv.release(req, keep_kv=not req.finish_reason.is_abort)
        if req in self.decoding:
            self.decoding.remove(req)
        self.reqs.pop(req.uid, None)
        if self.uid_by_rid.get(req.rid) == req.uid:
            del self.uid_by_rid[req.rid]
        if req.finish_reason.is_abort:
            self.stats.num_aborted += 1
        else:
            self.stats.num_finished += 1
        self.out.publish(req)
        if not self.reqs:
            self.scheduler.reset_new_token_ratio()

    def _abort(self, rid: str, error: SglrError) -> None:
        uid = self.uid_by_rid.get(rid)
        req = self.reqs.get(uid) if uid is not None else None
        if req is None or req.phase is Phase.FINISHED:
            return
        self.scheduler.remove(req.uid)
        self.out.mark_aborted(req, error)
        self._finish(req)

    def _abort_unfittable(self) -> None:
        """Nothing runs and nothing can be admitted: the head request can never fit."""
        waiting = sorted(
            (r for r in self.reqs.values() if r.phase is Phase.WAITING), key=lambda r: r.arrival_time
        )
        if waiting:
            req = waiting[0]
            self._abort(
                req.rid,
                InvalidRequestError(
                    f"the request needs more KV cache than the engine has ({self.runner.num_kv_slots} tokens); "
                    "lower max_new_tokens or raise max_total_tokens",
                    param="sampling_params.max_new_tokens",
                ),
            )

    def _flush(self) -> bool:
        """Drops the whole prefix cache; refused (False) while requests are in flight."""
        if self.reqs:
            return False
        self.cache.reset()
        return True

    def _fail_all(self, message: str) -> None:
        for req in list(self.reqs.values()):
            if req.phase is Phase.FINISHED:
                continue
            self.out.mark_aborted(req, EngineClosedError(message))
            try:
                self._finish(req)
            except Exception:  # the loop's state is broken: still answer the caller
                self.out.publish(req)
        while True:  # requests submitted after the loop stopped
            try:
                command, payload = self._inbox.get_nowait()
            except queue.Empty:
                break
            if command == "add":
                self.out.mark_aborted(payload, EngineClosedError(message))
                self.out.publish(payload)
            elif command == "flush":
                payload.set_result(False)

    def check_invariants(self) -> None:
        """Slot, row and scheduler accounting (raises on any leak)."""
        self.kv.check(self.reqs.values())
        self.scheduler.check_invariants()
        for req in self.decoding:
            assert req.row is not None and req.fill_len - req.num_computed >= 1, (
                f"request {req.rid} lost its state"
            )
