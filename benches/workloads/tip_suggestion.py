"""Skeleton-of-thought tip suggestion: a skeleton of tips in one turn, each tip expanded by a nested
program call (the calls run in parallel), then a summary over the expansions."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_topics": 3, "num_tips": 2, "prompt_words": 60, "tip_tokens": 6, "expansion_tokens": 8},
    "cpu": {"num_topics": 12, "num_tips": 3, "prompt_words": 400, "tip_tokens": 16, "expansion_tokens": 48},
    "gpu": {"num_topics": 128, "num_tips": 3, "prompt_words": 500, "tip_tokens": 32, "expansion_tokens": 256},
}


@sgl.function
def expand_tip(s, instructions, topic, tip, expansion_tokens):
    s += instructions + f"\nExpand this tip about {topic} into a paragraph: {tip}\nParagraph:"
    s += sgl.gen("paragraph", max_tokens=expansion_tokens)


@sgl.function
def tip_suggestion(s, instructions, topic, num_tips, tip_tokens, expansion_tokens):
    s += instructions + f"\nGive {num_tips} short tips about {topic}, one per line.\n"
    for i in range(1, num_tips + 1):
        s += f"{i}." + sgl.gen(f"tip_{i}", max_tokens=tip_tokens, stop="\n") + "\n"
    # NOTE: nested calls inherit the caller's interpreter mode, so the sequential ablation runs
    # them one after the other (as plain Python would) and the full system runs them in parallel.
    parallel = s.stream_executor.use_thread
    expansions = [
        expand_tip.run(
            instructions=instructions,
            topic=topic,
            tip=s[f"tip_{i}"],
            expansion_tokens=expansion_tokens,
            use_thread=parallel,
            **GREEDY_FIXED_LENGTH,  # a nested run does not inherit the caller's sampling defaults
        )
        for i in range(1, num_tips + 1)
    ]
    s += "Summary of the expanded tips:\n" + "\n".join(e["paragraph"] for e in expansions)
    s += "\nIn summary," + sgl.gen("summary", max_tokens=expansion_tokens)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    instructions = "You are a helpful assistant who gives useful tips. " + words(rng, size.prompt_words)
    arguments = [
        {
            "instructions": instructions,
            "topic": words(rng, 4),
            "num_tips": size.num_tips,
            "tip_tokens": size.tip_tokens,
            "expansion_tokens": size.expansion_tokens,
        }
        for _ in range(size.num_topics)
    ]
    return ProgramWorkload("tip-suggestion", tip_suggestion, arguments, dict(GREEDY_FIXED_LENGTH))
