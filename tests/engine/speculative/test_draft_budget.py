"""The draft budget (`engine/speculative/budget.py`): rows shared out as the batch grows, drafts
stopped for requests whose drafts fail and probed again ever more rarely, limits by length and
context, and no drafts for grammar-constrained requests."""

from __future__ import annotations

from types import SimpleNamespace

from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.speculative.budget import DraftBudget
from sglr.engine.speculative.config import SpeculativeConfig

SPEC = SpeculativeConfig("NGRAM", num_draft_tokens=8, num_steps=7, max_verify_rows=8,
                         ngram_min_match_window_size=1, ngram_max_match_window_size=12,
                         ngram_max_bfs_breadth=4, ngram_capacity=256)  # fmt: skip


def _req(uid: int, num_output: int = 1, max_new_tokens: int = 100, constraint=None, fill_len: int = 20):
    return SimpleNamespace(uid=uid, output_ids=[0] * num_output, max_new_tokens=max_new_tokens,
                           constraint=constraint, finish_reason=None, fill_len=fill_len)  # fmt: skip


def test_rows_are_shared_and_run_out_as_the_batch_grows() -> None:
    budget = DraftBudget(SPEC, max_context_len=4096, min_mean_accepted=1.0)
    assert budget.allot([_req(0)]) == {0: (7, 7)}
    two = budget.allot([_req(0), _req(1)])
    assert sorted(n for n, _ in two.values()) == [3, 3]
    five = budget.allot([_req(i) for i in range(5)])
    assert sum(n for n, _ in five.values()) == 3 and len(five) == 3
    assert budget.allot([_req(i) for i in range(8)]) == {}


def test_length_and_context_bound_the_depth() -> None:
    budget = DraftBudget(SPEC, max_context_len=24, min_mean_accepted=1.0)
    assert budget.allot([_req(0, num_output=97)]) == {0: (7, 2)}  # 3 tokens left: 2 drafts + bonus
    assert budget.allot([_req(1, num_output=99)]) == {}
    assert budget.allot([_req(2, fill_len=21)]) == {2: (7, 3)}


def test_grammar_constrained_requests_do_not_draft() -> None:
    budget = DraftBudget(SPEC, max_context_len=4096, min_mean_accepted=1.0)
    grammar = GrammarConstraintState.__new__(GrammarConstraintState)
    assert budget.allot([_req(0, constraint=grammar)]) == {}


def test_failing_drafts_stop_and_are_probed_ever_more_rarely() -> None:
    budget = DraftBudget(SPEC, max_context_len=4096, min_mean_accepted=1.0)
    req = _req(0)
    drafted_at = []
    for step in range(200):
        if budget.allot([req]):
            drafted_at.append(step)
            budget.observe(0, 0, 7)
    # The optimistic start decays below one accepted draft in 6 passes; then probes after 8, 16,
    # 32 and at most 64 skipped passes.
    assert drafted_at[:11] == [0, 1, 2, 3, 4, 5, 14, 31, 64, 129, 194]
    # A probe that succeeds brings the request back to drafting every pass.
    while not budget.allot([req]):
        pass
    for _ in range(3):
        budget.observe(0, 7, 7)
    assert all(budget.allot([req]) for _ in range(5))
