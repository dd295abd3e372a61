"""`RunningSet`: the requests that are decoding, and retraction when KV runs short.

A request joins when its prompt has run (`start`) and leaves when it ends (`discard`) or is
retracted. Each decode pass takes one slot per request, oldest first; when the pool cannot
give them all, the newest step back (`reserve_decode`): a retracted request's computed KV goes to
the prefix cache and it waits again at the head of the queue, so its re-admission is mostly a
cache hit, and the scheduler lowers its estimate of how many tokens running requests still
need, admitting less until decode fits. A decoding request whose constraint forced several
tokens runs them in the extend pass (`jump_forward_runs`). This class alone changes the set.
"""

from __future__ import annotations

from collections.abc import Iterator

from sglr.engine.kv import KVPool
from sglr.engine.request import Phase, Req
from sglr.engine.scheduler.extend import ExtendItem, ExtendKind, start_extend
from sglr.engine.scheduler.prefill import PrefillQueue
from sglr.engine.scheduler.table import RequestTable
from sglr.engine.stats import EngineStats


class RunningSet:
    def __init__(self, pool: KVPool, table: RequestTable, prefill: PrefillQueue, stats: EngineStats) -> None:
        self._pool = pool
        self._table = table
        self._prefill = prefill
        self._stats = stats
        self._reqs: dict[int, Req] = {}  # by uid, in the order they started decoding

    def __len__(self) -> int:
        return len(self._reqs)

    def __iter__(self) -> Iterator[Req]:
        return iter(self._reqs.values())

    def __contains__(self, req: object) -> bool:
        return isinstance(req, Req) and self._reqs.get(req.uid) is req

    def start(self, req: Req) -> None:
        """Its prompt has run (first prefill, or re-prefill after a retraction): it decodes."""
        assert req.uid not in self._reqs, f"request {req.rid} is decoding already"
        self._table.to_decoding(req)
        self._reqs[req.uid] = req

    def discard(self, req: Req) -> None:
        """It ended (a no-op when it was not decoding)."""
        self._reqs.pop(req.uid, None)

    def jump_forward_runs(self) -> list[ExtendItem]:
        """Decoding requests with several forced tokens pending, when the pool has room for
        them (else they take one per decode pass)."""
        items = []
        for req in self._reqs.values():
            num_pending = req.fill_len - req.num_computed
            if num_pending > 1 and req.finish_reason is None and self._pool.reserve([req.kv], [num_pending]):
                items.append(start_extend(self._pool, req, ExtendKind.JUMP_FORWARD))
        return items

    def decode_candidates(self, extended: set[int]) -> list[Req]:
        """The requests to decode this pass: all but those of its extend pass (`extended` uids)."""
        return [req for req in self._reqs.values() if req.uid not in extended]

    def reserve_decode(self, reqs: list[Req]) -> list[Req]:
        """Reserves one slot per request, oldest first, retracting the newest until the rest
        fit. Returns the requests that decode this pass."""
        reqs = sorted(reqs, key=lambda r: r.arrival_time)
        while reqs:
            if self._pool.reserve([req.kv for req in reqs], [1] * len(reqs)):
                return reqs
            self._retract(reqs.pop())
        return []

    def reserve_verify(self, reqs: list[Req], num_drafts: dict[int, int]) -> tuple[list[Req], bool]:
        """Reserves each request's slot plus one per draft (`num_drafts` by uid) for all of them
        at once; when the pool cannot, drafts are dropped first (`reserve_decode`). Returns the
        requests that decode this pass and whether their drafts are reserved."""
        reqs = sorted(reqs, key=lambda r: r.arrival_time)
        counts = [1 + num_drafts.get(req.uid, 0) for req in reqs]
        if self._pool.reserve([req.kv for req in reqs], counts):
            return reqs, True
        return self.reserve_decode(reqs), False

    def preempt(self, victim: Req) -> None:
        """Retracts a decoding request for a waiting one of higher priority (`preemption.py`)."""
        assert victim.uid in self._reqs, f"request {victim.rid} is not decoding"
        self._stats.num_preemptions += 1
        # Not a sign that decode ran short of memory: the admission estimate stays.
        self._retract(victim, lowers_estimate=False)

    def _retract(self, victim: Req, lowers_estimate: bool = True) -> None:
        self._pool.release(victim.kv, victim.computed_keys(), victim.cache_namespace, keep=True)
        del self._reqs[victim.uid]
        victim.num_retractions += 1
        self._stats.num_retractions += 1
        self._prefill.requeue(victim)
        if lowers_estimate:
            self._prefill.on_retract(self._reqs.values())

    def check_invariants(self, pending_uids: frozenset[int] = frozenset()) -> None:
        """Exactly the table's decoding requests are here, each with a token left to run: in its
        tokens, or sampled and not yet applied (`pending_uids`, the overlap schedule's)."""
        for req in self._reqs.values():
            assert req in self._table and req.phase is Phase.DECODING, f"request {req.rid} is not decoding"
            num_left = req.fill_len - req.num_computed + (1 if req.uid in pending_uids else 0)
            assert req.kv.is_admitted and num_left >= 1, f"request {req.rid} lost its state"
        num_decoding = sum(1 for req in self._table if req.phase is Phase.DECODING)
        assert num_decoding == len(self._reqs), "a decoding request is missing from the running set"
