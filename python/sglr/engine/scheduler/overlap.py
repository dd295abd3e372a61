"""`OverlappedDecode`: decode passes whose forward runs while the loop applies the previous
pass's tokens (the overlap schedule, `EngineConfig.overlap_schedule`).

Without it a decode pass is forward -> sample -> apply (constraint, detokenize, stop checks,
publish) and the device idles while the host applies. Here pass N's forward goes to the forward
thread first, fed with the tokens pass N-1 sampled, and only then does the loop apply those
tokens; pass N's tokens are sampled after that, so every mask, penalty and step count reads the
request as it is with N-1's token taken: the tokens are those of the plain schedule.

A request whose pending token ends it (a stop token, a stop string, the constraint's end) has
had one forward too many: its row is dropped and its slot freed with the rest of its KV. One
whose pending token must end it (its length limit) runs no forward. One whose constraint forced
more tokens keeps the pass's KV (that of the sampled token) and samples nothing: the forced run
goes next, as a jump-forward extend. A pending token whose request stopped decoding before it
was applied (retracted, preempted, aborted) is dropped: a retracted request runs its prompt and
outputs again and samples that token anew.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from sglr.engine.batch_executor import BatchExecutor, DeferredTokens, SampledToken
from sglr.engine.kv import KVPool
from sglr.engine.request import Req
from sglr.engine.scheduler.results import StepResults
from sglr.engine.scheduler.running import RunningSet
from sglr.model.chained_ids import ChainedIds
from sglr.model.runner import ForwardOutput


@dataclass(frozen=True)
class _PendingToken:
    """A token sampled for `req` but not yet applied, and the request's state it was drawn in."""

    req: Req
    sampled: DeferredTokens
    row: int  # the request's row in `sampled`
    num_output: int
    num_retractions: int

    @property
    def token(self) -> SampledToken:
        return self.sampled.resolve()[self.row]

    @property
    def is_current(self) -> bool:
        req = self.req
        return (
            req.finish_reason is None
            and len(req.output_ids) == self.num_output
            and req.num_retractions == self.num_retractions
        )


class OverlappedDecode:
    def __init__(
        self, pool: KVPool, running: RunningSet, results: StepResults, executor: BatchExecutor
    ) -> None:
        self._pool = pool
        self._running = running
        self._results = results
        self._executor = executor
        self._pending: dict[int, _PendingToken] = {}  # by request uid
        self._forward_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sglr-forward")

    @property
    def pending_uids(self) -> frozenset[int]:
        """Requests with a sampled token not yet applied (the stale ones left out)."""
        return frozenset(uid for uid, item in self._pending.items() if item.is_current)

    def close(self) -> None:
        self._forward_thread.shutdown(wait=True)

    def step(self, candidates: list[Req]) -> bool:
        """One decode pass over `candidates` (running requests outside this step's extend) that
        also applies the tokens of the pass before. Returns whether a forward ran."""
        self._drop_stale()
        runnable = [req for req in candidates if not self._must_end(req)]
        decode = self._running.reserve_decode(runnable) if runnable else []
        self._drop_stale()  # retraction drops the pending tokens of the retracted
        pending, self._pending = list(self._pending.values()), {}
        future: Future[ForwardOutput] | None = None
        chained: ChainedIds | None = None
        if decode:
            decode.sort(key=lambda req: req.lora_id)  # an adapter's rows side by side
            by_uid = {item.req.uid: item for item in pending}
            host_ids, chained = self._fed_ids(decode, by_uid)
            row_writes = self._pool.take_row_writes([req.kv for req in decode])
            forward = self._executor.decode_forward(decode, host_ids, row_writes, chained)
            future = self._forward_thread.submit(forward)
        try:
            for item in pending:  # (all current: stale ones were dropped above)
                self._results.accept(item.req, item.token)  # (the host reads the tokens here)
        finally:
            output = future.result() if future is not None else None  # never leave it running
        if output is None:
            return False
        input_ids = [
            by_uid[req.uid].token.token_id if req.uid in by_uid else host_ids[i]
            for i, req in enumerate(decode)
        ]
        self._sample(decode, input_ids, output, num_chained=0 if chained is None else chained.dst_rows.size)
        return True

    def _fed_ids(
        self, decode: list[Req], by_uid: dict[int, _PendingToken]
    ) -> tuple[list[int], ChainedIds | None]:
        """Each row's input id on the host, and the rows that take theirs on the device from the
        pass before (a placeholder on the host): the forward is queued before the host has read
        those tokens. (A request with forced tokens that found no room for their run takes one a
        pass.)"""
        if not (by_uid and self._executor.chains_ids):
            return [
                by_uid[req.uid].token.token_id if req.uid in by_uid else req.token_at(req.num_computed)
                for req in decode
            ], None
        source = next(iter(by_uid.values())).sampled  # (one pass's: the pass before this one)
        host_ids, src_rows, dst_rows = [], [], []
        for i, req in enumerate(decode):
            item = by_uid.get(req.uid)
            if item is None:
                host_ids.append(req.token_at(req.num_computed))
                continue
            assert item.sampled is source, f"request {req.rid}: a pending token of an earlier pass"
            host_ids.append(0)
            src_rows.append(item.row)
            dst_rows.append(i)
        rows = (np.array(src_rows, np.int64), np.array(dst_rows, np.int64))
        return host_ids, ChainedIds(source.device_ids, *rows) if dst_rows else None

    def check_invariants(self) -> None:
        """A pending token is its request's; a current one's request is decoding (a stale one,
        of a request that ended or was retracted since, goes at the next pass)."""
        for uid, item in self._pending.items():
            assert item.req.uid == uid, f"request {item.req.rid}: a pending token under uid {uid}"
            if item.is_current:
                assert item.req in self._running, f"request {item.req.rid} has a token but is not decoding"

    def _must_end(self, req: Req) -> bool:
        """Its pending token reaches its length limit: applying it ends the request."""
        if req.uid not in self._pending:
            return False
        num_output = len(req.output_ids) + 1
        return num_output >= req.max_new_tokens or req.fill_len + 1 >= self._results.context_len

    def _drop_stale(self) -> None:
        running = self._running
        for uid in [
            uid for uid, item in self._pending.items() if not (item.is_current and item.req in running)
        ]:
            del self._pending[uid]

    def _sample(
        self, decode: list[Req], input_ids: list[int], output: ForwardOutput, num_chained: int
    ) -> None:
        """The pass's KV stays for the requests still decoding, unless jump-forward retokenized
        the token it was fed (its text joined with the forced text: that position now holds
        another token, run next); those with no forced tokens left sample their next token
        (pending until the next pass)."""
        alive = {req.uid for req in decode if req.finish_reason is None and req in self._running}
        for req, fed_id in zip(decode, input_ids, strict=True):
            if req.uid in alive:
                position = req.num_computed
                self._pool.commit(req.kv)
                if req.token_at(position) != fed_id:
                    self._pool.truncate(req.kv, position)
        self._results.count_decode_pass(decode, len(decode) - len(alive), num_chained)
        rows = [i for i, req in enumerate(decode) if req.uid in alive and req.fill_len == req.num_computed]
        reqs = [decode[i] for i in rows]
        sampled = self._executor.sample_rows(reqs, output.next_token_logits, rows)
        for row, req in enumerate(reqs):
            self._pending[req.uid] = _PendingToken(
                req, sampled, row, len(req.output_ids), req.num_retractions
            )
