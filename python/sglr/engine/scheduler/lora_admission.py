"""`LoraAdmission`: at most `max_loras_per_batch` distinct LoRA adapters among the requests the
scheduler may put in one batch (queued, prefilling or decoding), so no batch ever holds more.

A request of another adapter waits here, in arrival order, and joins the queue when an adapter's
last request ends. The base model (id 0) is never counted. Owned by `PrefillQueue`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable

from sglr.engine.request import Req


class LoraAdmission:
    def __init__(self, max_loras_per_batch: int) -> None:
        self.max_loras_per_batch = max_loras_per_batch
        # Called with an adapter's id when its first request is counted (it may join batches
        # from now on) and when its last request in flight ends (`LoraLifecycle`).
        self.on_active: Callable[[int], None] | None = None
        self.on_idle: Callable[[int], None] | None = None
        self._num_reqs_by_lora: Counter[int] = Counter()
        self._lora_by_uid: dict[int, int] = {}  # adapter requests counted, by uid
        self._held: deque[Req] = deque()

    def __len__(self) -> int:
        """Requests held back."""
        return len(self._held)

    def is_held(self, uid: int) -> bool:
        return any(req.uid == uid for req in self._held)

    def take(self, req: Req) -> bool:
        """Counts `req` and says True when its adapter fits the batch limit; holds it otherwise."""
        active = req.lora_id == 0 or req.lora_id in self._num_reqs_by_lora
        # A request that would take a new adapter's place does not overtake the held ones.
        if active or (not self._held and self._fits(req.lora_id)):
            self._count(req)
            return True
        self._held.append(req)
        return False

    def num_requests(self, lora_id: int) -> int:
        """Requests in flight with this adapter (counted or held)."""
        return self._num_reqs_by_lora[lora_id] + sum(req.lora_id == lora_id for req in self._held)

    def drop(self, req: Req) -> None:
        """A request that ends (finished or aborted, counted or held)."""
        lora_id = self._lora_by_uid.pop(req.uid, None)
        if lora_id is not None:
            self._num_reqs_by_lora[lora_id] -= 1
            if not self._num_reqs_by_lora[lora_id]:
                del self._num_reqs_by_lora[lora_id]
        if any(held.uid == req.uid for held in self._held):
            self._held = deque(held for held in self._held if held.uid != req.uid)
        if req.lora_id and self.on_idle is not None and not self.num_requests(req.lora_id):
            self.on_idle(req.lora_id)

    def release(self) -> list[Req]:
        """Held requests that fit now, in arrival order (counted); the first that does not fit
        keeps its place and the ones behind it."""
        released = []
        while self._held and self._fits(self._held[0].lora_id):
            req = self._held.popleft()
            self._count(req)
            released.append(req)
        return released

    def check_invariants(self, live_uids: set[int]) -> None:
        if len(self._num_reqs_by_lora) > self.max_loras_per_batch:
            raise AssertionError(f"{len(self._num_reqs_by_lora)} adapters admitted, over the limit")
        if not set(self._lora_by_uid) <= live_uids or any(req.uid not in live_uids for req in self._held):
            raise AssertionError("an ended request is still counted or held for its adapter")
        counted = Counter(self._lora_by_uid.values())
        if counted != self._num_reqs_by_lora:
            raise AssertionError("adapter request counts disagree with the requests counted")

    def _fits(self, lora_id: int) -> bool:
        return (
            lora_id == 0
            or lora_id in self._num_reqs_by_lora
            or len(self._num_reqs_by_lora) < self.max_loras_per_batch
        )

    def _count(self, req: Req) -> None:
        if req.lora_id != 0:
            self._lora_by_uid[req.uid] = req.lora_id
            self._num_reqs_by_lora[req.lora_id] += 1
            if self._num_reqs_by_lora[req.lora_id] == 1 and self.on_active is not None:
                self.on_active(req.lora_id)

    def is_active(self, lora_id: int) -> bool:
        """Whether requests of this adapter are queued or running (it may be in a batch)."""
        return lora_id in self._num_reqs_by_lora
