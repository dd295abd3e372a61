"""`WaitingRequest`: one row of the waiting queue as the next selection offers it, for the
dashboard (`Engine.get_waiting_queue`). Read on the loop thread between steps, bounded by
`MAX_WAITING_SHOWN`, and plain values, so a worker rank sends it as it is."""

from __future__ import annotations

from dataclasses import dataclass

MAX_WAITING_SHOWN = 100


@dataclass(frozen=True, slots=True)
class WaitingRequest:
    rid: str
    priority: int | None  # None unless priority scheduling is on
    prompt_len: int
    # The cached prefix it matched when last ranked (0 before its first ranking under a
    # cache-aware policy: the view reads the tree never, so watching changes no eviction).
    matched_prefix_len: int
    waiting_s: float
    is_urgent: bool  # offered ahead of the policy: requeued, or waiting past the starvation bound
    lora_id: int
