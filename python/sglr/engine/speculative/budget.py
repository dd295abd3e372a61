"""`DraftBudget`: how many drafts each decoding request gets in this verify pass.

Drafts pay only while a pass costs about the same whatever its rows: `max_verify_rows` rows per
pass in all, each request's last token first, so drafts shrink as the batch grows and stop once
it fills the rows (a large batch decodes as without speculation). Within that, a request drafts
while its recent passes accepted at least `min_mean_accepted` tokens on average (an exponential
mean, optimistic at first); one that fell below drafts again after `_FIRST_PROBE` passes, and
after twice as many each time its probe fails (up to `_LAST_PROBE`), so text that turns
copy-heavy later is found again while free text pays for few probes. Requests under a token FSM (regex, JSON
schema) draft, cut where the FSM forbids (`Speculator.plan`); grammar-constrained ones do not
(their parse chart cannot be forked per draft).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sglr.engine.constraints.state import ConstraintState
from sglr.engine.request import Req
from sglr.engine.speculative.config import SpeculativeConfig

_EMA_WEIGHT = 0.3  # of the latest pass
_FIRST_PROBE = 8
_LAST_PROBE = 64


@dataclass
class _Acceptance:
    mean_accepted: float
    passes_skipped: int = 0
    probe_after: int = _FIRST_PROBE


class DraftBudget:
    def __init__(self, spec: SpeculativeConfig, max_context_len: int, min_mean_accepted: float) -> None:
        self._spec = spec
        self._max_context_len = max_context_len
        self._min_mean_accepted = min_mean_accepted
        self._by_uid: dict[int, _Acceptance] = {}

    def allot(self, reqs: Sequence[Req]) -> dict[int, tuple[int, int]]:
        """By uid: (most drafts, deepest draft) for the requests that draft this pass."""
        num_spare = self._spec.max_verify_rows - len(reqs)
        if num_spare <= 0:
            return {}
        chosen = []
        for req in reqs:
            max_depth = self._max_depth(req)
            if max_depth < 1:
                continue
            acceptance = self._by_uid.setdefault(
                req.uid, _Acceptance(float(self._spec.max_drafts_per_request))
            )
            if (
                acceptance.mean_accepted >= self._min_mean_accepted
                or acceptance.passes_skipped >= acceptance.probe_after
            ):
                chosen.append((req, max_depth, acceptance))
            else:
                acceptance.passes_skipped += 1
        chosen.sort(key=lambda item: -item[2].mean_accepted)
        allotted = {}
        for i, (req, max_depth, _) in enumerate(chosen):
            share = max(1, num_spare // (len(chosen) - i))  # the best first when rows are few
            num_drafts = min(share, num_spare, self._spec.max_drafts_per_request)
            if num_drafts < 1:
                break
            allotted[req.uid] = (num_drafts, min(max_depth, num_drafts))
            num_spare -= num_drafts
        return allotted

    def observe(self, uid: int, num_accepted: int, num_proposed: int) -> None:
        """A verify pass accepted `num_accepted` of the request's `num_proposed` drafts."""
        acceptance = self._by_uid.get(uid)
        if acceptance is None or num_proposed == 0:
            return
        was_probe = acceptance.mean_accepted < self._min_mean_accepted
        acceptance.mean_accepted += _EMA_WEIGHT * (num_accepted - acceptance.mean_accepted)
        if acceptance.mean_accepted >= self._min_mean_accepted:
            acceptance.probe_after = _FIRST_PROBE
        elif was_probe:
            acceptance.probe_after = min(2 * acceptance.probe_after, _LAST_PROBE)
        acceptance.passes_skipped = 0

    def forget(self, uid: int) -> None:
        self._by_uid.pop(uid, None)

    def tracked_uids(self) -> set[int]:
        return set(self._by_uid)

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
