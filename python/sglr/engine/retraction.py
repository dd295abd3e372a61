"""Retraction: when decode runs out of KV slots, the newest requests step back.

A retracted request's computed KV goes to the prefix cache and it waits again at the head of
the queue, so its re-admission is mostly a cache hit; the scheduler lowers its estimate of how
many tokens running requests still need, admitting less until decode fits.
"""

from __future__ import annotations

from sglr.engine.kv import KVPool
from sglr.engine.lifecycle import RequestTable
from sglr.engine.request import Req
from sglr.engine.stats import EngineStats
from sglr.engine.wait_queue import WaitQueue


def reserve_decode_slots(
    reqs: list[Req], pool: KVPool, table: RequestTable, queue: WaitQueue, stats: EngineStats
) -> list[Req]:
    """Reserves one slot per request, oldest first, retracting the newest until the rest fit.
    Returns the requests that decode this step."""
    reqs = sorted(reqs, key=lambda r: r.arrival_time)
    while reqs:
        if pool.reserve([req.kv for req in reqs], [1] * len(reqs)):
            return reqs
        victim = reqs.pop()
        pool.release(victim.kv, victim.computed_keys(), victim.spec.namespace, keep=True)
        table.decoding.remove(victim)
        victim.num_retractions += 1
        stats.num_retractions += 1
        queue.requeue(victim)
        queue.on_retract(table.decoding)
    return []
