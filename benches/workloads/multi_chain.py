"""Multi-chain reasoning: fork 5 chains of thought from the question, then one final answer over
all of them (the join re-reads the chains, whose prefix is the question)."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_questions": 3, "prompt_words": 60, "chain_tokens": 8, "answer_tokens": 4},
    "cpu": {"num_questions": 12, "prompt_words": 500, "chain_tokens": 48, "answer_tokens": 16},
    "gpu": {"num_questions": 128, "prompt_words": 600, "chain_tokens": 256, "answer_tokens": 32},
}
NUM_CHAINS = 5


@sgl.function
def multi_chain(s, instructions, question, chain_tokens, answer_tokens):
    s += instructions + "\nQuestion: " + question + "\n"
    chains = s.fork(NUM_CHAINS)
    chains += "Let's think step by step." + sgl.gen("chain", max_tokens=chain_tokens)
    s += "".join(f"Reasoning {i + 1}:{chain['chain']}\n" for i, chain in enumerate(chains))
    s += "Considering all the reasoning above, the final answer is" + sgl.gen(
        "answer", max_tokens=answer_tokens
    )


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    instructions = "Answer the question with careful reasoning. " + words(rng, size.prompt_words)
    arguments = [
        {
            "instructions": instructions,
            "question": words(rng, 40) + "?",
            "chain_tokens": size.chain_tokens,
            "answer_tokens": size.answer_tokens,
        }
        for _ in range(size.num_questions)
    ]
    return ProgramWorkload("multi-chain", multi_chain, arguments, dict(GREEDY_FIXED_LENGTH))
