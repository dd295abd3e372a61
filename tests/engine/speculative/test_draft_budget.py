"""The draft budget (`engine/speculative/budget.py`): drafts chosen by expected tokens per
second of the pass from measured pass costs and each request's record, rows bounded as the batch
grows, failing requests stopped and probed again ever more rarely, limits by length and context,
and no drafts for grammar-constrained requests."""

from __future__ import annotations

from types import SimpleNamespace

from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.speculative.budget import DraftBudget, PassCosts
from sglr.engine.speculative.config import SpeculativeConfig

SPEC = SpeculativeConfig("NGRAM", num_draft_tokens=8, num_steps=7, max_verify_rows=8,
                         ngram_min_match_window_size=1, ngram_max_match_window_size=12,
                         ngram_max_bfs_breadth=4, ngram_capacity=256)  # fmt: skip


def _req(uid: int, num_output: int = 1, max_new_tokens: int = 100, constraint=None, fill_len: int = 20):
    return SimpleNamespace(uid=uid, output_ids=[0] * num_output, max_new_tokens=max_new_tokens,
                           constraint=constraint, finish_reason=None, fill_len=fill_len)  # fmt: skip


def _budget(cost_of_rows) -> DraftBudget:
    budget = DraftBudget(SPEC, max_context_len=4096)
    for rows in range(1, 17):
        budget.costs.observe(rows, cost_of_rows(rows))
    return budget


def test_a_plain_pass_is_measured_before_any_draft() -> None:
    budget = DraftBudget(SPEC, max_context_len=4096)
    assert budget.allot([_req(0)]) == {}
    budget.costs.observe(1, 0.01)
    assert budget.allot([_req(0)]) == {0: (7, 7)}  # more rows: unmeasured, tried as if free


def test_free_rows_are_filled_and_costly_rows_are_not() -> None:
    free = _budget(lambda rows: 0.01)
    assert free.allot([_req(0)]) == {0: (7, 7)}
    assert sum(n for n, _ in free.allot([_req(i) for i in range(5)]).values()) == 3
    assert free.allot([_req(i) for i in range(8)]) == {}
    linear = _budget(lambda rows: 0.01 * rows)  # every row costs a whole pass: never worth it
    assert linear.allot([_req(0)]) == {}


def test_the_cost_curve_decides_how_many() -> None:
    # The CPU's shape: rows nearly free up to 4, then each a fifth of a pass.
    stepped = _budget(lambda rows: 0.01 * (1 + 0.1 * min(rows, 4) + 0.2 * max(rows - 4, 0)))
    budget_for = stepped.allot([_req(0)])
    assert budget_for == {0: (3, 3)}  # a chance of 0.7: the fourth draft adds 0.24 for 0.2


def test_length_and_context_bound_the_depth() -> None:
    budget = _budget(lambda rows: 0.01)
    assert budget.allot([_req(0, num_output=97)]) == {0: (2, 2)}  # 3 tokens left: 2 drafts + bonus
    assert budget.allot([_req(1, num_output=99)]) == {}
    budget = DraftBudget(SPEC, max_context_len=24)
    budget.costs.observe(1, 0.01)
    assert budget.allot([_req(2, fill_len=21)]) == {2: (3, 3)}


def test_grammar_constrained_requests_do_not_draft() -> None:
    budget = _budget(lambda rows: 0.01)
    grammar = GrammarConstraintState.__new__(GrammarConstraintState)
    assert budget.allot([_req(0, constraint=grammar)]) == {}


def test_failing_drafts_stop_and_are_probed_with_one_draft_now_and_then() -> None:
    budget = _budget(lambda rows: 0.01 * (1 + 0.3 * (rows - 1)))  # a draft row costs 0.3 pass
    req = _req(0)
    drafted: list[tuple[int, int]] = []  # (step, drafts)
    for step in range(400):
        allotted = budget.allot([req])
        if allotted:
            drafted.append((step, allotted[0][0]))
            budget.observe(0, 0, 1)  # the first draft rejected
    assert [step for step, _ in drafted[:2]] == [0, 1]
    late = [(step, n) for step, n in drafted if step >= 20]
    assert 0 < len(late) < 40  # probes, under one pass in ten
    assert all(n == 1 for _, n in late)  # each a single, cheap draft
    # Accepted drafts bring it back to drafting every pass, deeper.
    for _ in range(6):
        budget.observe(0, 7, 7)
    assert all(budget.allot([req])[0][0] > 1 for _ in range(5))


def test_pass_costs_are_means_and_optimistic_where_unmeasured() -> None:
    costs = PassCosts()
    assert costs.estimate(3) is None
    costs.observe(1, 1.0)
    costs.observe(1, 2.0)
    assert costs.estimate(1) == 1.2
    assert costs.estimate(5) == 1.2
    costs.observe(4, 3.0)
    assert costs.estimate(5) == 3.0 and costs.estimate(3) == 1.2
