"""HellaSwag-style: a 20-shot prefix shared by every question, a context, then `select` among 4
continuations (scored in one batch of prompt-logprob requests)."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_questions": 4, "num_shots": 4, "context_words": 20, "ending_words": 8},
    "cpu": {"num_questions": 32, "num_shots": 20, "context_words": 40, "ending_words": 16},
    "gpu": {"num_questions": 512, "num_shots": 20, "context_words": 40, "ending_words": 16},
}


@sgl.function
def hellaswag_choice(s, examples, context, endings):
    s += examples + context
    s += sgl.select("ending", choices=endings)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    examples = "".join(
        words(rng, size.context_words) + " " + words(rng, size.ending_words) + "\n\n"
        for _ in range(size.num_shots)
    )
    arguments = [
        {
            "examples": examples,
            "context": words(rng, size.context_words),
            "endings": [" " + words(rng, size.ending_words) for _ in range(4)],
        }
        for _ in range(size.num_questions)
    ]
    return ProgramWorkload(
        "hellaswag", hellaswag_choice, arguments, dict(GREEDY_FIXED_LENGTH), plain_generation=False
    )
