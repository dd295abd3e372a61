"""`LoraAdmission` alone: the adapters of queued and running requests never exceed the limit,
held requests join in arrival order, the base model is never held, and an adapter's last
request ending is reported (what deferred unloads wait for); invariants after every operation."""

from __future__ import annotations

import random

import numpy as np

from sglr.engine.io import SequenceSpec
from sglr.engine.output import QueueSink
from sglr.engine.request import Req
from sglr.engine.scheduler.lora_admission import LoraAdmission
from sglr.sampling_params import SamplingParams


def request(uid: int, lora_id: int) -> Req:
    spec = SequenceSpec(rid=f"r{uid}", text=None, input_ids=(1, 2), params=SamplingParams())
    return Req(uid, spec, np.array([1, 2], dtype=np.int32), 4, frozenset(), QueueSink(), lora_id=lora_id)


def test_held_requests_join_in_order_and_base_passes() -> None:
    gate = LoraAdmission(max_loras_per_batch=2)
    idle: list[int] = []
    gate.on_idle = idle.append
    a, b, c, base, c2 = request(1, 1), request(2, 2), request(3, 3), request(4, 0), request(5, 3)
    assert gate.take(a) and gate.take(b)
    assert not gate.take(c)  # a third adapter waits
    assert gate.take(base)  # the base model never does
    assert not gate.take(c2)
    assert gate.take(request(6, 1))  # an admitted adapter's requests pass
    live = {1, 2, 3, 4, 5, 6}
    gate.check_invariants(live)
    gate.drop(b)
    live.discard(2)
    assert idle == [2]
    assert [r.uid for r in gate.release()] == [3, 5]
    gate.check_invariants(live)
    assert gate.num_requests(3) == 2 and gate.num_requests(1) == 2


def test_random_lifecycles_keep_the_limit() -> None:
    rng = random.Random(0)
    gate = LoraAdmission(max_loras_per_batch=3)
    live: dict[int, Req] = {}
    admitted: set[int] = set()
    for uid in range(1, 400):
        if live and rng.random() < 0.45:
            victim = live.pop(rng.choice(sorted(live)))
            admitted.discard(victim.uid)
            gate.drop(victim)
            admitted.update(r.uid for r in gate.release())
        else:
            req = request(uid, rng.choice([0, 0, 1, 2, 3, 4, 5, 6]))
            live[uid] = req
            if gate.take(req):
                admitted.add(uid)
        gate.check_invariants(set(live))
        assert len({live[u].lora_id for u in admitted} - {0}) <= 3
        assert len(gate) == len(live) - len(admitted)
