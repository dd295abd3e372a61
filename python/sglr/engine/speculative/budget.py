"""`DraftBudget`: how many drafts each decoding request gets in this verify pass.

A pass of more rows costs more: how much depends on the device, the model and the batch (on this
project's CPU the 4-bit step costs 1.0, 1.1, 1.6, 2.7x for 1, 2, 4, 8 rows; on a GPU rows are
nearly free). So the budget measures it: `PassCosts` keeps the seconds of recent passes by their
number of rows. Each request's drafts are judged by `DraftAcceptance`, the chance that its next
draft token is accepted (its recent passes' accepted / tried drafts, starting from an optimistic
prior): a chain of n drafts is expected to add a + a^2 + ... + a^n tokens. The budget takes the
best drafts of all requests in order of expected gain and stops at the number that maximizes
expected tokens per second of the pass, within `max_verify_rows` rows. Free text's drafts fail,
its chance falls and it stops drafting; while it does not draft its record fades back toward the
prior, so it probes again, more rarely the longer its record of failures. Requests under a token
FSM (regex, JSON schema) draft, cut where the FSM forbids (`Speculator.plan`); grammar-constrained
ones do not (their parse chart cannot be forked per draft).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sglr.engine.constraints.state import ConstraintState
from sglr.engine.request import Req
from sglr.engine.speculative.config import SpeculativeConfig

_PRIOR_ACCEPTED, _PRIOR_TRIED = 0.7, 1.0  # the chance a request's drafts start with
_RECORD_WEIGHT = 0.8  # of a request's record at each pass it drafts
_FADE = 0.97  # of a request's record at each pass it does not draft
_COST_WEIGHT = 0.2  # of the latest pass in a row count's mean cost


class PassCosts:
    """Mean seconds of a pass by its number of rows (the latest weighted `_COST_WEIGHT`)."""

    def __init__(self) -> None:
        self._seconds: dict[int, float] = {}

    def observe(self, num_rows: int, seconds: float) -> None:
        mean = self._seconds.get(num_rows)
        self._seconds[num_rows] = seconds if mean is None else mean + _COST_WEIGHT * (seconds - mean)

    def estimate(self, num_rows: int) -> float | None:
        """The measured mean; unmeasured, the nearest measured smaller pass's (optimistic: it
        gets tried, then measured); None before any smaller pass was measured."""
        if num_rows in self._seconds:
            return self._seconds[num_rows]
        smaller = [r for r in self._seconds if r < num_rows]
        return self._seconds[max(smaller)] if smaller else None


@dataclass
class DraftAcceptance:
    accepted: float = 0.0
    tried: float = 0.0

    @property
    def chance(self) -> float:
        return (self.accepted + _PRIOR_ACCEPTED) / (self.tried + _PRIOR_TRIED)

    def record(self, num_accepted: int, num_tried: int) -> None:
        self.accepted = _RECORD_WEIGHT * self.accepted + num_accepted
        self.tried = _RECORD_WEIGHT * self.tried + num_tried

    def fade(self) -> None:
        self.accepted *= _FADE
        self.tried *= _FADE


class DraftBudget:
    def __init__(self, spec: SpeculativeConfig, max_context_len: int) -> None:
        self._spec = spec
        self._max_context_len = max_context_len
        self.costs = PassCosts()
        self._by_uid: dict[int, DraftAcceptance] = {}

    def allot(self, reqs: Sequence[Req]) -> dict[int, tuple[int, int]]:
        """By uid: (most drafts, deepest draft) for the requests that draft this pass."""
        num_spare = self._spec.max_verify_rows - len(reqs)
        gains: list[tuple[float, int]] = []  # (expected tokens of one more draft, uid)
        for req in reqs:
            acceptance = self._by_uid.setdefault(req.uid, DraftAcceptance())
            chance = acceptance.chance
            max_drafts = min(self._max_depth(req), self._spec.max_drafts_per_request)
            gains.extend((chance**k, req.uid) for k in range(1, max_drafts + 1))
        gains.sort(reverse=True)
        num_drafts = self._best_num_drafts(len(reqs), [g for g, _ in gains[: max(num_spare, 0)]])
        allotted: dict[int, int] = {}
        for _, uid in gains[:num_drafts]:
            allotted[uid] = allotted.get(uid, 0) + 1
        for req in reqs:
            if req.uid not in allotted:
                self._by_uid[req.uid].fade()
        return {uid: (n, n) for uid, n in allotted.items()}

    def observe(self, uid: int, num_accepted: int, num_tried: int) -> None:
        """A verify pass tried `num_tried` of the request's drafts along its walk (the accepted
        ones and the first rejected one, if any) and accepted `num_accepted`."""
        acceptance = self._by_uid.get(uid)
        if acceptance is not None and num_tried:
            acceptance.record(num_accepted, num_tried)

    def chance(self, uid: int) -> float:
        return self._by_uid[uid].chance

    def forget(self, uid: int) -> None:
        self._by_uid.pop(uid, None)

    def tracked_uids(self) -> set[int]:
        return set(self._by_uid)

    def _best_num_drafts(self, num_requests: int, gains: list[float]) -> int:
        """How many of the (descending) gains maximize expected tokens per second of the pass."""
        base = self.costs.estimate(num_requests)
        if base is None:
            return 0  # a plain pass of this size first: the costs of more rows are judged by it
        best, best_rate, tokens = 0, num_requests / base, float(num_requests)
        for n, gain in enumerate(gains, start=1):
            tokens += gain
            cost = self.costs.estimate(num_requests + n) or base
            if tokens / cost > best_rate:
                best, best_rate = n, tokens / cost
        return best

    def _max_depth(self, req: Req) -> int:
        """Deepest draft that can still be kept: the bonus token must fit the request's
        max_new_tokens and every draft its context."""
        if req.finish_reason is not None or not (
            req.constraint is None or isinstance(req.constraint, ConstraintState)
        ):
            return 0
        by_length = req.max_new_tokens - len(req.output_ids) - 1
        by_context = self._max_context_len - req.fill_len
        return min(self._spec.num_steps, by_length, by_context)
