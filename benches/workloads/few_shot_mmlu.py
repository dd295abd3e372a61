"""Few-shot MMLU-style: per subject one 5-shot prefix (~1.5k tokens), many questions, 1 output token.

The questions of a subject share its whole prefix, and they arrive shuffled across subjects:
a cache-aware scheduler groups them, a cache-less one prefills the prefix for every question.
"""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_subjects": 2, "questions_per_subject": 3, "shot_words": 40},
    "cpu": {"num_subjects": 4, "questions_per_subject": 12, "shot_words": 280},
    "gpu": {"num_subjects": 16, "questions_per_subject": 64, "shot_words": 280},
}
NUM_SHOTS = 5


def _question(rng: random.Random, num_words: int) -> str:
    options = "".join(f"\n{letter}. {words(rng, 8)}" for letter in "ABCD")
    return words(rng, num_words) + "?" + options + "\nAnswer:"


@sgl.function
def few_shot_question(s, examples, question):
    s += examples + question + sgl.gen("answer", max_tokens=1)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    arguments = []
    for subject in range(size.num_subjects):
        header = f"The following are multiple choice questions about subject {subject}.\n\n"
        # Each shot: a question of ~shot_words tokens with its options and the answer letter.
        shots = [
            _question(rng, size.shot_words - 45) + " " + rng.choice("ABCD") + "\n\n" for _ in range(NUM_SHOTS)
        ]
        examples = header + "".join(shots)
        arguments += [
            {"examples": examples, "question": _question(rng, 30)} for _ in range(size.questions_per_subject)
        ]
    rng.shuffle(arguments)
    return ProgramWorkload("few-shot", few_shot_question, arguments, dict(GREEDY_FIXED_LENGTH))
