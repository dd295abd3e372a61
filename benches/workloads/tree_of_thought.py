"""Tree-of-thought: plan -> execute -> reflect, forked at every level (branches^1 plans, branches^2
executions, branches^3 reflections), then a final answer from the root over the reflections.
Each level forks from a state whose text is the parent branch's: deep shared prefixes."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_questions": 2, "num_branches": 2, "prompt_words": 60, "step_tokens": 6},
    "cpu": {"num_questions": 8, "num_branches": 2, "prompt_words": 500, "step_tokens": 24},
    "gpu": {"num_questions": 64, "num_branches": 3, "prompt_words": 600, "step_tokens": 128},
}
STAGES = (
    ("plan", "Write a plan for the next step."),
    ("execute", "Carry out the plan."),
    ("reflect", "Check the result and say whether it is correct."),
)


@sgl.function
def tree_of_thought(s, instructions, question, num_branches, step_tokens):
    s += instructions + "\nQuestion: " + question + "\n"
    frontier = [s]
    for stage, request in STAGES:
        children = []
        for state in frontier:
            forks = state.fork(num_branches)
            forks += f"{request}\n{stage.capitalize()}:" + sgl.gen(stage, max_tokens=step_tokens) + "\n"
            children.extend(forks)
        frontier = children
    reflections = "\n".join(f"- {branch['reflect'].strip()}" for branch in frontier)
    s += "Reflections:\n" + reflections + "\nFinal answer:" + sgl.gen("answer", max_tokens=step_tokens)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    instructions = "Solve the math word problem step by step. " + words(rng, size.prompt_words)
    arguments = [
        {
            "instructions": instructions,
            "question": words(rng, 40) + "?",
            "num_branches": size.num_branches,
            "step_tokens": size.step_tokens,
        }
        for _ in range(size.num_questions)
    ]
    return ProgramWorkload("tree-of-thought", tree_of_thought, arguments, dict(GREEDY_FIXED_LENGTH))
