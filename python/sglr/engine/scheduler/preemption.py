"""Priority preemption: which decoding request a waiting one of higher priority retracts.

SGLang's `--priority-scheduling-preemption-threshold`: when an admission pass stops for want of
memory or of a place among the running requests, and the best waiting request's priority beats
a running one's by more than the threshold, the lowest-priority running request (the newest of
them on a tie) is retracted like any other (`RunningSet.preempt`: its KV stays cached, it waits
again behind the higher priorities). One per pass: the next pass admits what that freed, and
retracts another only if that was not enough.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from sglr.engine.priority import PriorityPolicy
from sglr.engine.request import Req

# Why an admission pass stopped when a waiting request could not get in (`decision.stop_reason`).
BLOCKED_STOPS = frozenset({"memory", "running_cap"})


class Preemptible(Protocol):
    """The running set as preemption sees it."""

    def __iter__(self) -> Iterator[Req]: ...

    def preempt(self, victim: Req) -> None: ...


def pick_victim(policy: PriorityPolicy, waiting: Iterable[Req], running: Iterable[Req]) -> Req | None:
    """The running request to retract for the best of `waiting`, or None (nothing outranked)."""
    best = min(waiting, key=lambda req: (policy.queue_key(req.priority), req.arrival_time), default=None)
    if best is None:
        return None
    outranked = [req for req in running if policy.preempts(best.priority, req.priority)]
    return max(outranked, key=lambda req: (policy.queue_key(req.priority), req.arrival_time), default=None)
