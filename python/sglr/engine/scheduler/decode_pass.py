"""`PlainDecode`: a step's decode pass, forward -> sample -> apply, with speculative drafts
verified in the same pass when a speculator is on. (`overlap.py` is the overlapped schedule.)"""

from __future__ import annotations

import time

from sglr.engine.batch_executor import BatchExecutor
from sglr.engine.kv import KVPool
from sglr.engine.request import Req
from sglr.engine.scheduler.results import StepResults
from sglr.engine.scheduler.running import RunningSet
from sglr.engine.speculative.speculator import Speculator


class PlainDecode:
    def __init__(
        self,
        pool: KVPool,
        running: RunningSet,
        results: StepResults,
        executor: BatchExecutor,
        speculator: Speculator | None,
    ) -> None:
        self._pool = pool
        self._running = running
        self._results = results
        self._executor = executor
        self._speculator = speculator

    @property
    def pending_uids(self) -> frozenset[int]:
        return frozenset()  # every sampled token is applied in its own pass

    def close(self) -> None:
        pass

    def check_invariants(self) -> None:
        pass

    def step(self, candidates: list[Req]) -> bool:
        """Decodes `candidates` (the running requests outside this step's extend), retracting
        the newest when KV runs short; returns whether any ran."""
        if not candidates:
            return False
        trees = self._speculator.plan(candidates) if self._speculator is not None else {}
        if trees:
            decode, drafted = self._running.reserve_verify(candidates, {u: len(t) for u, t in trees.items()})
            if not drafted:
                trees = {}
        else:
            decode = self._running.reserve_decode(candidates)
        if not decode:
            return False
        row_writes = self._pool.take_row_writes([req.kv for req in decode])
        started = time.monotonic()
        if trees:
            verified = self._executor.verify(decode, [trees.get(r.uid) for r in decode], row_writes)
            self._observe_pass(len(decode) + sum(map(len, trees.values())), started)
            self._results.after_verify(decode, trees, verified)
        else:
            sampled = self._executor.decode(decode, row_writes)
            self._observe_pass(len(decode), started)
            self._results.after_decode(decode, sampled)
        return True

    def _observe_pass(self, num_rows: int, started: float) -> None:
        if self._speculator is not None:
            self._speculator.observe_pass(num_rows, time.monotonic() - started)
