"""The three choices methods, checked against scores computed here from the logprobs."""

from __future__ import annotations

import math
import random

import pytest

import sglr as sgl
from sglr.lang.choices import choices_method_by_name, decide


def entries(values):
    return [[None, 0, None]] + [[v, i, None] for i, v in enumerate(values)]


def random_case(rng: random.Random):
    num_choices = rng.randint(2, 5)
    choices = [f"c{i}" for i in range(num_choices)]
    cond = [[round(rng.uniform(-5, 0), 1) for _ in range(rng.randint(1, 4))] for _ in choices]
    uncond = [[round(rng.uniform(-5, 0), 1) for _ in values] for values in cond]
    return choices, cond, uncond


@pytest.mark.parametrize("seed", range(20))
def test_token_length_normalized_is_argmax_of_mean(seed):
    choices, cond, _ = random_case(random.Random(seed))
    decision = decide(choices, [entries(v) for v in cond], sgl.token_length_normalized)
    means = [sum(v) / len(v) for v in cond]
    assert decision.decision == choices[means.index(max(means))]
    assert decision.meta_info["normalized_prompt_logprobs"] == pytest.approx(means)


@pytest.mark.parametrize("seed", range(20))
def test_unconditional_likelihood_normalized(seed):
    choices, cond, uncond = random_case(random.Random(seed))
    # The first unconditional entry has no context: null, counted as 0.
    unconditional = [[[None, 0, None]] + [[u, 0, None] for u in values[1:]] for values in uncond]
    decision = decide(
        choices, [entries(v) for v in cond], sgl.unconditional_likelihood_normalized, None, unconditional
    )
    scores = [
        sum(c - (0.0 if k == 0 else u) for k, (c, u) in enumerate(zip(cv, uv, strict=True))) / len(cv)
        for cv, uv in zip(cond, uncond, strict=True)
    ]
    assert decision.decision == choices[scores.index(max(scores))]
    with pytest.raises(ValueError, match="Unconditional"):
        decide(choices, [entries(v) for v in cond], sgl.unconditional_likelihood_normalized)


def test_greedy_token_selection_compares_position_by_position():
    # a: -1 -1 -9 ; b: -1 -2 ; c: -1 -1 -0.5 -> a and c tie twice, c wins at position 3.
    choices = ["a", "b", "c"]
    cond = [[-1.0, -1.0, -9.0], [-1.0, -2.0], [-1.0, -1.0, -0.5]]
    decision = decide(choices, [entries(v) for v in cond], sgl.greedy_token_selection)
    assert decision.decision == "c"
    # Shorter rows are padded with their own mean.
    assert decision.meta_info["greedy_logprob_matrix"][1] == [-1.0, -2.0, -1.5]
    # Full ties go to the first choice.
    tie = decide(["x", "y"], [entries([-1.0]), entries([-1.0])], sgl.greedy_token_selection)
    assert tie.decision == "x"


def test_empty_choice_scores_never_win_and_lookup_by_name():
    decision = decide(["empty", "real"], [[[None, 0, None]], entries([-20.0])], sgl.token_length_normalized)
    assert decision.decision == "real"
    assert decision.meta_info["normalized_prompt_logprobs"][0] == -math.inf
    assert choices_method_by_name("greedy_token_selection") is sgl.greedy_token_selection
    with pytest.raises(ValueError, match="unknown choices method"):
        choices_method_by_name("vote")
