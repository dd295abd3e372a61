"""`WaitQueue`: the requests waiting for admission, held by the Rust scheduler.

The scheduler ranks them cache-aware (longest cached prefix first by default), budgets each
step's prefill against free + evictable KV, chunks long prompts and locks admitted prefixes in
the tree. It never frees memory: the KV pool evicts what a decision needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sglr._core import Scheduler
from sglr.engine.config import EngineConfig
from sglr.engine.prompt_logprobs import logprob_start
from sglr.engine.request import Phase, Req


class WaitQueue:
    def __init__(
        self, config: EngineConfig, max_running_requests: int, chunked_prefill_size: int, context_len: int
    ) -> None:
        self.scheduler = Scheduler(
            config.schedule_policy,
            max_prefill_tokens=chunked_prefill_size,
            max_running_requests=max_running_requests,
            starvation_guard=config.starvation_guard,
            max_wait_s=config.max_wait_s,
            max_request_tokens=context_len,
            seed=config.seed,
        )

    def __len__(self) -> int:
        return len(self.scheduler)

    def add(self, req: Req) -> None:
        req.phase = Phase.WAITING
        self.scheduler.add_request(
            req.uid,
            req.fill_keys(),
            req.max_new_tokens,
            req.spec.namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=logprob_start(req),
        )

    def requeue(self, req: Req) -> None:
        """Back at the head of the queue (retracted, or admitted without a free row)."""
        req.phase = Phase.WAITING
        self.scheduler.requeue(
            req.uid,
            req.fill_keys(),
            max(req.tokens_left, 1),
            req.spec.namespace,
            arrival_time=req.arrival_time,
            max_prefix_len=logprob_start(req),
        )

    def remove(self, uid: int) -> None:
        self.scheduler.remove(uid)

    def select(self, tree: Any, num_free_slots: int, running: list[Req]) -> Any:
        """One admission decision (matches and locks prefixes in `tree`; the GIL is released)."""
        running_left = np.array([req.tokens_left for req in running], dtype=np.int32)
        return self.scheduler.select(tree, num_free_slots, running_left)

    def on_retract(self, running: list[Req]) -> None:
        decoded = sum(len(r.output_ids) for r in running)
        max_new = sum(r.max_new_tokens for r in running)
        self.scheduler.on_retract(decoded, max_new, len(running))

    def on_decode_step(self) -> None:
        self.scheduler.decay_new_token_ratio()

    def on_idle(self) -> None:
        self.scheduler.reset_new_token_ratio()

    def check_invariants(self) -> None:
        self.scheduler.check_invariants()
