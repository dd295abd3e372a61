"""Branch-solve-merge LLM judge: a long article, one forked branch per judging dimension (all on
the article's prefix), then a merge that grades the article from every branch's judgment."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_articles": 2, "article_words": 100, "judgment_tokens": 8},
    "cpu": {"num_articles": 8, "article_words": 1200, "judgment_tokens": 32},
    "gpu": {"num_articles": 64, "article_words": 1500, "judgment_tokens": 128},
}
DIMENSIONS = ("clarity", "originality", "evidence", "structure", "grammar", "persuasiveness")


@sgl.function
def llm_judge(s, article, judgment_tokens):
    s += "You are an expert judge of writing. Read the article.\n\nArticle:\n" + article + "\n\n"
    branches = s.fork(len(DIMENSIONS))
    for branch, dimension in zip(branches, DIMENSIONS, strict=True):
        branch += f"Judge the article's {dimension} in two sentences.\nJudgment:"
        branch += sgl.gen("judgment", max_tokens=judgment_tokens)
    judgments = "".join(
        f"{dimension}:{branch['judgment']}\n" for dimension, branch in zip(DIMENSIONS, branches, strict=True)
    )
    s += "Judgments:\n" + judgments + "Overall grade and one-sentence summary:"
    s += sgl.gen("verdict", max_tokens=judgment_tokens)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    arguments = [
        {"article": words(rng, size.article_words), "judgment_tokens": size.judgment_tokens}
        for _ in range(size.num_articles)
    ]
    return ProgramWorkload("llm-judge", llm_judge, arguments, dict(GREEDY_FIXED_LENGTH))
