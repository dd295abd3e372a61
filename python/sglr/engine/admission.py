"""What the next extend pass runs: new admissions, prompt chunks and jump-forward runs.

The Rust scheduler decides which waiting requests to admit (matching and locking their cached
prefixes); the KV pool takes over each lock, gives the request a row and reserves slots for the
tokens the pass computes. Decoding requests whose constraint forced several tokens at once run
those tokens here too, as one extend, when the pool has room (else one per decode step).
"""

from __future__ import annotations

from sglr.engine.batch_executor import ExtendItem
from sglr.engine.kv import KVPool
from sglr.engine.lifecycle import RequestTable
from sglr.engine.prompt_logprobs import logprob_start
from sglr.engine.request import Phase, Req
from sglr.engine.stats import EngineStats
from sglr.engine.wait_queue import WaitQueue


class Admitter:
    def __init__(self, pool: KVPool, table: RequestTable, queue: WaitQueue, stats: EngineStats) -> None:
        self.pool = pool
        self.table = table
        self.queue = queue
        self.stats = stats
        self.last_stop_reason = ""  # why the last selection stopped admitting ("memory", ...)

    def next_extend(self) -> list[ExtendItem]:
        decision = self.queue.select(self.pool.tree, self.pool.num_free_slots, self.table.decoding)
        self.last_stop_reason = decision.stop_reason
        items = []
        for i, admission in enumerate(decision.admitted):
            req = self.table.reqs[admission.rid]
            if not admission.is_continuation and not self._take(
                req, decision.prefix_slots_of(i), admission.node
            ):
                continue
            assert req.num_computed == admission.prefix_len, "scheduler and engine disagree on progress"
            if not self.pool.reserve([req.kv], [admission.extend_len]):
                raise RuntimeError("the scheduler admitted more prefill than the KV pool holds")
            items.append(self._item(req, sample=admission.is_prompt_done, score_from=logprob_start(req)))
        return items + self._jump_forward_runs()

    def _take(self, req: Req, prefix_slots: object, node: int | None) -> bool:
        """A new admission: row and prefix from the pool; False (requeued) when no row is free."""
        if not self.pool.admit(req.kv, prefix_slots, node):  # type: ignore[arg-type]
            self.queue.remove(req.uid)
            self.queue.requeue(req)
            return False
        if req.cached_tokens is None:
            req.cached_tokens = min(req.num_computed, req.prompt_len)
        if not req.has_prefilled:
            self.stats.num_prompt_tokens += req.prompt_len
            self.stats.num_cached_prompt_tokens += req.cached_tokens
        req.phase = Phase.PREFILLING
        return True

    def _jump_forward_runs(self) -> list[ExtendItem]:
        items = []
        for req in self.table.decoding:
            num_pending = req.fill_len - req.num_computed
            if num_pending > 1 and req.finish_reason is None and self.pool.reserve([req.kv], [num_pending]):
                items.append(self._item(req, sample=True, score_from=None))
        return items

    def _item(self, req: Req, sample: bool, score_from: int | None) -> ExtendItem:
        self.pool.take_row_writes([req.kv])  # dropped: an extend rewrites the whole row
        return ExtendItem(req, req.num_computed, sample=sample, score_from=score_from)
