"""Sampled output with speculation keeps the model's distribution, end to end: many requests of
the tiny model sample two tokens at temperature 1 (a logit bias makes one first token an even chance:
the tiny model's own distribution is nearly flat) while a drafter proposes the two likeliest
second tokens (so drafts are accepted and rejected often); for the most frequent first token,
the second tokens' counts are tested against the distribution the model and the bias give (its
logits from the runner) with a chi-square test at p = 0.001. Draft rows draw exactly as plain
decoding does at their step (`test_speculative_engine.py`: seeded output equal token for token
with and without speculation), their logits are their paths' (`test_verify_tree_attention.py`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import torch
from oracle_drafter import FlatCosts

from sglr.engine.speculative.drafter import Drafter
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.model.forward_batch import ExtendRequest

PROMPT = "The quick brown fox jumps over the lazy"
NUM_REQUESTS = 1500
TEMPERATURE = 0.5  # sharper than the tiny model's own: more tokens with enough samples to test
# chi-square critical values at p = 0.001 by degrees of freedom (from the distribution's table)
CHI2_CRITICAL_0_001 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322,
                       8: 26.124, 9: 27.877, 10: 29.588, 11: 31.264, 12: 32.909, 13: 34.528, 14: 36.123,
                       15: 37.697, 16: 39.252, 17: 40.790, 18: 42.312, 19: 43.820, 20: 45.315, 21: 46.797,
                       22: 48.268, 23: 49.728, 24: 51.179, 25: 52.620, 26: 54.052, 27: 55.476, 28: 56.892,
                       29: 58.301, 30: 59.703}  # fmt: skip


class TopTwoDrafter(Drafter):
    """After the prompt and a first token, drafts that context's two likeliest next tokens (and a
    child under the likeliest); nothing elsewhere."""

    name = "TOP2"

    def __init__(self, prompt_ids: list[int], candidates: dict[int, list[int]]) -> None:
        self.prompt_ids = prompt_ids
        self.candidates = candidates
        self.num_proposed = 0

    def propose(self, uid: int, token_ids: np.ndarray, max_nodes: int, max_depth: int) -> DraftTree | None:
        tokens = token_ids.tolist()
        if len(tokens) != len(self.prompt_ids) + 1 or tokens[-1] not in self.candidates:
            return None
        tree = DraftTree()
        first, second = self.candidates[tokens[-1]]
        likeliest = tree.add(ROOT, first)
        tree.add(ROOT, second)
        if max_depth > 1 and max_nodes > 2:
            tree.add(likeliest, first)
        self.num_proposed += 1
        return tree

    def forget(self, uid: int) -> None:
        pass

    def tracked_uids(self) -> set[int]:
        return set()

    def check_invariants(self) -> None:
        pass


def _next_token_probs(runner, tokens: list[int], bias: dict[int, float]) -> np.ndarray:
    """The sampled distribution after `tokens`: logits + bias at `TEMPERATURE`."""
    empty = np.zeros(0, dtype=np.int64)
    first = runner.num_kv_slots - len(tokens) + 1
    out = runner.forward_extend([ExtendRequest(runner.runner_config.max_num_reqs, np.array(tokens), empty,
                                               np.arange(first, first + len(tokens)))])  # fmt: skip
    logits = out.next_token_logits[0].double()
    for token_id, value in bias.items():
        logits[token_id] += value
    return torch.softmax(logits / TEMPERATURE, dim=-1).numpy()


def _chi_square(observed: Counter, probs: np.ndarray, num_samples: int) -> tuple[float, int]:
    """The statistic over bins of the likeliest tokens expected at least 5 times (at most 30),
    the rest pooled; and the number of bins."""
    expected = probs * num_samples
    big = [int(t) for t in np.argsort(-probs)[:30] if expected[t] >= 5]
    counts = [observed[t] for t in big] + [num_samples - sum(observed[t] for t in big)]
    wants = [expected[t] for t in big] + [num_samples - sum(expected[t] for t in big)]
    if wants[-1] < 5:  # too little left over to be a bin of its own: pooled with the last
        counts[-2:] = [counts[-2] + counts[-1]]
        wants[-2:] = [wants[-2] + wants[-1]]
    return sum((c - w) ** 2 / w for c, w in zip(counts, wants, strict=True)), len(counts)


def test_sampled_tokens_follow_the_models_distribution(tiny_dir: Path, make_engine) -> None:
    engine = make_engine(tiny_dir, speculative_algorithm="NGRAM", speculative_max_verify_rows=64,
                         max_running_requests=16)  # fmt: skip
    try:
        prompt_ids = engine.tokenizer.encode(PROMPT)
        plain_probs = _next_token_probs(engine.runner, prompt_ids, {})
        favourite = int(np.argmax(plain_probs))
        # The bias that makes the favourite an even chance (the rest keeps half the mass).
        bias = {favourite: TEMPERATURE * float(np.log((1 - plain_probs[favourite]) / plain_probs[favourite]))}
        first_probs = _next_token_probs(engine.runner, prompt_ids, bias)
        likely_first = np.argsort(-first_probs)[:4].tolist()
        conditionals = {t: _next_token_probs(engine.runner, [*prompt_ids, t], bias) for t in likely_first}
        candidates = {t: np.argsort(-p)[:2].tolist() for t, p in conditionals.items()}
        drafter = TopTwoDrafter(prompt_ids, candidates)
        speculator = engine._scheduler._speculator
        speculator.drafter = drafter
        speculator.budget.costs = FlatCosts()  # every request drafts, whatever the passes cost
        params = {"temperature": TEMPERATURE, "max_new_tokens": 3, "ignore_eos": True,
                  "logit_bias": {str(favourite): bias[favourite]}}  # fmt: skip
        outputs = [o["output_ids"] for o in engine.generate([PROMPT] * NUM_REQUESTS, params)]
        first_token, num_first = Counter(ids[0] for ids in outputs).most_common(1)[0]
        assert first_token in candidates and num_first > 300
        assert drafter.num_proposed >= num_first
        # The second token: drawn at the verify pass's root row.
        seconds = Counter(ids[1] for ids in outputs if ids[0] == first_token)
        chi2, num_bins = _chi_square(seconds, conditionals[first_token], num_first)
        assert num_bins >= 5 and chi2 < CHI2_CRITICAL_0_001[num_bins - 1], (chi2, num_bins)
    finally:
        engine.shutdown()
