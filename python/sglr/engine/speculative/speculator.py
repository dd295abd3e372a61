"""`Speculator`: the scheduler loop's one handle on speculative decoding.

Per decode pass: `plan` gives the requests that draft this pass their trees (the budget decides
who and how many, the drafter what); the loop reserves their slots, the executor verifies, and
`observe` records each request's outcome (its `spec_verify_ct` and accepted drafts, the
engine's counters, the budget's acceptance). State kept per request (the drafter's index, the
budget's acceptance) is dropped as soon as the request stops decoding (`prune`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglr.engine.request import Req
from sglr.engine.speculative.budget import DraftBudget
from sglr.engine.speculative.config import SpeculativeConfig
from sglr.engine.speculative.drafter import DraftAsk, Drafter
from sglr.engine.speculative.ngram import NgramDrafter
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.engine.stats import EngineStats
from sglr.errors import EngineConfigError, InvariantError


class Speculator:
    def __init__(
        self,
        spec: SpeculativeConfig,
        max_context_len: int,
        on_gpu: bool,
        stats: EngineStats,
        drafter: Drafter,
    ) -> None:
        self.spec = spec
        self.drafter = drafter
        self.budget = DraftBudget(spec, max_context_len)
        self._stats = stats

    @classmethod
    def for_runner(cls, config: Any, runner: Any, stats: EngineStats) -> Speculator | None:
        """The engine's speculator over `runner` (None when speculation is off)."""
        if config.speculative_algorithm is None:
            return None
        on_gpu = runner.device.type == "cuda"
        spec = SpeculativeConfig.from_engine(config, on_gpu)
        assert spec is not None
        num_draft_rows = len(getattr(runner, "draft_rows", ()))
        if num_draft_rows < spec.max_verify_rows - 1:
            raise EngineConfigError(
                f"speculative decoding needs {spec.max_verify_rows - 1} draft rows in the runner's "
                f"request table, it has {num_draft_rows}: build the runner with RunnerConfig(num_draft_rows=...)"
            )
        return cls(spec, runner.max_context_len, on_gpu, stats, _drafter(spec, config, runner))

    def plan(self, reqs: Sequence[Req]) -> dict[int, DraftTree]:
        """Draft trees by uid for the requests that draft this pass."""
        by_uid = {req.uid: req for req in reqs}
        allotted = self.budget.allot(reqs)
        asks = [DraftAsk(uid, by_uid[uid].fill_ids(), n, depth) for uid, (n, depth) in allotted.items()]
        trees = {}
        for ask, tree in zip(asks, self.drafter.propose_all(asks), strict=True):
            req = by_uid[ask.uid]
            if tree is not None and req.constraint is not None:  # a token FSM (budget.py)
                tree = tree.constrained(req.constraint.fsm, req.constraint.state)
            if tree is not None and len(tree):
                trees[ask.uid] = tree
        return trees

    def observe(self, req: Req, tree: DraftTree | None, accepted_nodes: Sequence[int] = ()) -> None:
        """A decode pass's outcome for `req`: the drafts it had (None: none) and those accepted."""
        req.spec_verify_ct += 1
        if tree is None:
            return
        num_accepted = len(accepted_nodes)
        req.spec_accepted_tokens += num_accepted
        self._stats.num_draft_tokens += len(tree)
        self._stats.num_accepted_draft_tokens += num_accepted
        # Drafts tried along the walk: the accepted ones, and the one rejected where it stopped.
        last = accepted_nodes[-1] if accepted_nodes else ROOT
        rejected = bool(tree.children[last + 1])
        self.budget.observe(req.uid, num_accepted, num_accepted + rejected)

    def observe_pass(self, num_rows: int, seconds: float) -> None:
        """How long a decode pass of `num_rows` rows took (the budget's costs)."""
        self.budget.costs.observe(num_rows, seconds)

    def prune(self, live_uids: set[int]) -> None:
        """Forgets the requests that are no longer decoding."""
        for uid in (self.drafter.tracked_uids() | self.budget.tracked_uids()) - live_uids:
            self.drafter.forget(uid)
            self.budget.forget(uid)

    def check_invariants(self, live_uids: set[int]) -> None:
        self.drafter.check_invariants()
        stale = (self.drafter.tracked_uids() | self.budget.tracked_uids()) - live_uids
        if stale:
            raise InvariantError(f"speculative state kept for requests no longer decoding: {sorted(stale)}")


def _drafter(spec: SpeculativeConfig, config: Any, runner: Any) -> Drafter:
    if spec.algorithm == "NGRAM":
        return NgramDrafter(
            spec.ngram_min_match_window_size,
            spec.ngram_max_match_window_size,
            spec.ngram_max_bfs_breadth,
            spec.ngram_capacity,
        )
    from sglr.engine.speculative.draft_model import DraftModelDrafter
    from sglr.model.runner import ModelRunner, RunnerConfig

    draft_runner = ModelRunner(
        RunnerConfig(
            spec.draft_model_path,
            dtype=config.dtype,
            device=str(runner.device),
            kv_num_tokens=runner.num_kv_slots,
            max_num_reqs=runner.runner_config.max_num_reqs,
            max_context_len=runner.max_context_len,
            gguf_weights=config.gguf_weights,
            cuda_graph_max_bs=0,
        )
    )
    if draft_runner.vocab_size != runner.vocab_size:
        raise EngineConfigError(
            f"the draft model's vocabulary ({draft_runner.vocab_size} tokens) is not the target's "
            f"({runner.vocab_size}): STANDALONE needs the same tokenizer"
        )
    return DraftModelDrafter(draft_runner, spec.eagle_topk)
