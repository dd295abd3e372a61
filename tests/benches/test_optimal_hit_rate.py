"""The optimal hit rate the benchmarks compare against, on hand-checked request sets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

from benchlib.hit_rate import optimal_hit_rate


def test_shared_prefix_is_computed_once() -> None:
    # Distinct prefixes: 1,2,3 shared + 4,5 + 6,7 = 7 of 10 prompt tokens.
    assert optimal_hit_rate([([1, 2, 3, 4, 5], []), ([1, 2, 3, 6, 7], [])]) == pytest.approx(0.3)


def test_identical_prompts_recompute_their_last_token() -> None:
    assert optimal_hit_rate([([1, 2, 3], []), ([1, 2, 3], [])]) == pytest.approx(1 - 4 / 6)


def test_decoded_tokens_count_as_cached_for_the_next_turn() -> None:
    # Turn 1 decodes [9, 8]; only 9 has KV afterwards. Turn 2 computes 8 and 5 (and 1, 2 once).
    assert optimal_hit_rate([([1, 2], [9, 8]), ([1, 2, 9, 8, 5], [])]) == pytest.approx(1 - 4 / 7)


def test_nothing_shared_means_nothing_cached() -> None:
    assert optimal_hit_rate([([1, 2], [3]), ([4, 5], [6])]) == 0.0
    assert optimal_hit_rate([]) == 0.0
