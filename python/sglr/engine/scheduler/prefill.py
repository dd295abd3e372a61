"""`PrefillQueue`: the requests waiting for admission, and the admissions of each extend pass.

The waiting requests are held by the Rust scheduler, which ranks them cache-aware (longest
cached prefix first by default), budgets each pass's prefill against free + evictable KV,
chunks long prompts and locks the admitted prefixes in the tree (GIL released). It never frees
memory: the KV pool takes over each lock, gives the request a row and reserves the slots the
pass computes, evicting what the decision needs. This class alone adds to, takes from and
reorders the queue. With priority scheduling the Rust scheduler offers higher priorities first
(`engine/priority.py` maps them to its keys), the policy's order standing within a priority.
"""

from __future__ import annotations

import time
from collections.abc import Collection

import numpy as np

from sglr._core import Scheduler
from sglr.engine.config import EngineConfig
from sglr.engine.kv import KVPool
from sglr.engine.prompt_logprobs import logprob_start, prefix_limit
from sglr.engine.request import Req
from sglr.engine.scheduler.extend import ExtendItem, ExtendKind, start_extend
from sglr.engine.scheduler.lora_admission import LoraAdmission
from sglr.engine.scheduler.preemption import BLOCKED_STOPS, Preemptible, pick_victim
from sglr.engine.scheduler.table import RequestTable
from sglr.engine.scheduler.waiting_queue import MAX_WAITING_SHOWN, WaitingRequest
from sglr.engine.stats import EngineStats


class PrefillQueue:
    def __init__(
        self,
        config: EngineConfig,
        max_running_requests: int,
        chunked_prefill_size: int,
        context_len: int,
        pool: KVPool,
        table: RequestTable,
        stats: EngineStats,
    ) -> None:
        self._scheduler = Scheduler(
            config.schedule_policy,
            max_prefill_tokens=chunked_prefill_size,
            max_running_requests=max_running_requests,
            starvation_guard=config.starvation_guard,
            max_wait_s=config.max_wait_s,
            max_request_tokens=context_len,
            seed=config.seed,
        )
        self._pool = pool
        self._table = table
        self._stats = stats
        self._loras = LoraAdmission(config.max_loras_per_batch)
        self.priorities = config.priority_policy
        self.last_stop_reason = ""  # why the last selection stopped admitting ("memory", ...)

    def __len__(self) -> int:
        return len(self._scheduler)

    # ----- the queue -----

    def add(self, req: Req) -> None:
        self._table.to_waiting(req)
        self._pool.prefetch(req.fill_keys(), req.cache_namespace)  # a second KV tier's pages
        if self._loras.take(req):
            self._enqueue(req)

    def _enqueue(self, req: Req) -> None:
        self._scheduler.add_request(
            req.uid,
            req.fill_keys(),
            req.max_new_tokens,
            req.cache_namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=prefix_limit(req),
            priority_key=self.priorities.queue_key(req.priority),
        )

    def requeue(self, req: Req) -> None:
        """Back at the head of the queue (retracted, or admitted without a free row)."""
        self._table.to_waiting(req)
        self._scheduler.requeue(
            req.uid,
            req.fill_keys(),
            max(req.tokens_left, 1),
            req.cache_namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=prefix_limit(req),
            priority_key=self.priorities.queue_key(req.priority),
        )

    def remove(self, uid: int) -> None:
        self._scheduler.remove(uid)

    def waiting_queue(self, limit: int) -> list[WaitingRequest]:
        """The first `limit` (at most `MAX_WAITING_SHOWN`) queued requests in the order the next
        selection offers them; those held outside the queue for their adapter's turn are not
        in it. Loop thread only (the request table is its own)."""
        now = time.monotonic()
        rows = []
        for uid, matched_len, is_urgent, _ in self._scheduler.waiting_order(min(limit, MAX_WAITING_SHOWN)):
            req = self._table.by_uid(uid)
            rows.append(
                WaitingRequest(
                    rid=req.rid,
                    priority=req.priority if self.priorities.enabled else None,
                    prompt_len=req.prompt_len,
                    matched_prefix_len=matched_len,
                    waiting_s=now - req.arrival_time,
                    is_urgent=is_urgent,
                    lora_id=req.lora_id,
                )
            )
        return rows

    @property
    def lora_admission(self) -> LoraAdmission:
        return self._loras

    def is_held(self, req: Req) -> bool:
        """Waiting outside the queue for its adapter's place in batches (`LoraAdmission`)."""
        return self._loras.is_held(req.uid)

    def on_request_end(self, req: Req) -> None:
        """`req` ended: its adapter's place may go to a held request."""
        self._loras.drop(req)
        for released in self._loras.release():
            self._enqueue(released)

    # ----- admission -----

    def next_extend(self, running: Preemptible) -> list[ExtendItem]:
        """This pass's admissions: new requests and prompt chunks, their slots reserved. With
        priority scheduling, a waiting request left out may retract a running one (`preemption.py`)."""
        running_left = np.array([req.tokens_left for req in running], dtype=np.int32)
        self._pool.load_prefetched()  # stored pages into the tree, where the match finds them
        decision = self._scheduler.select(self._pool.tree, self._pool.num_free_slots, running_left)
        self.last_stop_reason = decision.stop_reason
        items = []
        for i, admission in enumerate(decision.admitted):
            req = self._table.by_uid(admission.rid)
            if not admission.is_continuation and not self._take(
                req, decision.prefix_slots_of(i), admission.node
            ):
                continue
            assert req.num_computed == admission.prefix_len, "scheduler and engine disagree on progress"
            if not self._pool.reserve([req.kv], [admission.extend_len]):
                raise RuntimeError("the scheduler admitted more prefill than the KV pool holds")
            items.append(
                start_extend(self._pool, req, _kind(req, admission.is_prompt_done), logprob_start(req))
            )
        if self.priorities.enabled and decision.stop_reason in BLOCKED_STOPS:
            waiting = [req for req in self._table.waiting() if not self.is_held(req)]
            victim = pick_victim(self.priorities, waiting, running)
            if victim is not None:
                running.preempt(victim)
        return items

    def _take(self, req: Req, prefix_slots: object, node: int | None) -> bool:
        """A new admission: row and prefix from the pool; False (requeued) when no row is free."""
        if not self._pool.admit(req.kv, prefix_slots, node):  # type: ignore[arg-type]
            self.remove(req.uid)
            self.requeue(req)
            return False
        if req.cached_tokens is None:
            req.cached_tokens = min(req.num_computed, req.prompt_len)
        if not req.has_prefilled:
            self._stats.num_prompt_tokens += req.prompt_len
            self._stats.num_cached_prompt_tokens += req.cached_tokens
        self._table.to_prefilling(req)
        return True

    # ----- the scheduler's estimate of what running requests still need -----

    def on_retract(self, running: Collection[Req]) -> None:
        decoded = sum(len(r.output_ids) for r in running)
        max_new = sum(r.max_new_tokens for r in running)
        self._scheduler.on_retract(decoded, max_new, len(running))

    def on_decode_step(self) -> None:
        self._scheduler.decay_new_token_ratio()

    def on_idle(self) -> None:
        self._scheduler.reset_new_token_ratio()

    def check_invariants(self) -> None:
        self._scheduler.check_invariants()
        self._loras.check_invariants({req.uid for req in self._table})


def _kind(req: Req, is_prompt_done: bool) -> ExtendKind:
    if not is_prompt_done:
        return ExtendKind.PROMPT_CHUNK
    return ExtendKind.RESUME if req.has_prefilled else ExtendKind.PROMPT_END
