"""`RequestTable`: every request in flight on the scheduler thread, and the only writer of its phase.

A request's phase says which owner holds it: COMPILING (its constraint compiles off the loop),
WAITING (the prefill queue, `prefill.py`), PREFILLING (admitted, prompt chunks still to run),
DECODING (the running set, `running.py`), FINISHED (ended, `endings.py`). The owners move a
request between phases only through the transitions here; everyone else reads `req.phase`.
"""

from __future__ import annotations

from collections.abc import Iterator

from sglr.engine.request import Phase, Req
from sglr.engine.stats import EngineStats

# The phases in which a request holds a KV row (and those in which it holds none).
_ADMITTED = (Phase.PREFILLING, Phase.DECODING)


class RequestTable:
    def __init__(self, stats: EngineStats) -> None:
        self._stats = stats
        self._reqs: dict[int, Req] = {}  # every request not finished yet, by uid
        self._uid_by_rid: dict[str, int] = {}

    # ----- what everyone reads -----

    def __len__(self) -> int:
        return len(self._reqs)

    def __iter__(self) -> Iterator[Req]:
        """The requests in flight, in arrival order at the loop (a snapshot: owners may end
        requests while the caller iterates)."""
        return iter(list(self._reqs.values()))

    def get(self, rid: str) -> Req | None:
        uid = self._uid_by_rid.get(rid)
        return self._reqs.get(uid) if uid is not None else None

    def by_uid(self, uid: int) -> Req:
        return self._reqs[uid]

    def __contains__(self, req: Req) -> bool:
        return self._reqs.get(req.uid) is req

    def waiting(self) -> list[Req]:
        return sorted(
            (r for r in self._reqs.values() if r.phase is Phase.WAITING), key=lambda r: r.arrival_time
        )

    # ----- the phase transitions -----

    def add(self, req: Req) -> None:
        """A new request: COMPILING while its constraint compiles, else WAITING (to be queued)."""
        self._reqs[req.uid] = req
        self._uid_by_rid[req.rid] = req.uid
        self._stats.num_requests += 1
        req.phase = Phase.COMPILING if req.params.has_constraint else Phase.WAITING

    def to_waiting(self, req: Req) -> None:
        """Queued, or back in the queue (retracted, or admitted without a free row)."""
        req.phase = Phase.WAITING

    def to_prefilling(self, req: Req) -> None:
        req.phase = Phase.PREFILLING

    def to_decoding(self, req: Req) -> None:
        req.phase = Phase.DECODING

    def to_finished(self, req: Req) -> None:
        """Ended: FINISHED, and out of the table (a request that never joined it, refused at
        the door, only changes phase)."""
        req.phase = Phase.FINISHED
        if self._reqs.get(req.uid) is req:
            del self._reqs[req.uid]
        if self._uid_by_rid.get(req.rid) == req.uid:
            del self._uid_by_rid[req.rid]

    def check_invariants(self) -> None:
        """Each rid names its request; no finished request is in flight; a request holds a KV
        row exactly while it is admitted."""
        for rid, uid in self._uid_by_rid.items():
            assert self._reqs[uid].rid == rid, f"rid {rid} names another request"
        for req in self._reqs.values():
            assert req.phase is not Phase.FINISHED, f"finished request {req.rid} is still in flight"
            assert req.kv.is_admitted == (req.phase in _ADMITTED), (
                f"request {req.rid} is {req.phase.value} but {'holds' if req.kv.is_admitted else 'lacks'} a KV row"
            )
