"""ReAct agent: a long fixed few-shot prompt, then several steps; each step is a `gen` that stops
at "Observation", followed by the tool's observation (replayed from a seeded trace, as the paper's
benchmark replays recorded HotpotQA tool calls)."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {
        "num_agents": 4,
        "prompt_words": 200,
        "num_steps": 2,
        "step_tokens": 8,
        "observation_words": 10,
    },
    "cpu": {
        "num_agents": 16,
        "prompt_words": 1500,
        "num_steps": 4,
        "step_tokens": 24,
        "observation_words": 40,
    },
    "gpu": {
        "num_agents": 256,
        "prompt_words": 2000,
        "num_steps": 5,
        "step_tokens": 64,
        "observation_words": 60,
    },
}


def _few_shot_prompt(rng: random.Random, num_words: int) -> str:
    instructions = (
        "Solve a question answering task with interleaving Thought, Action, Observation steps. "
        "Thought can reason about the current situation, and Action can be search[entity], "
        "lookup[keyword] or finish[answer].\nHere are some examples.\n"
    )
    examples = []
    for _ in range(max(1, num_words // 150)):
        example = "Question: " + words(rng, 16) + "?\n"
        for step in range(1, 4):
            example += f"Thought {step}: {words(rng, 14)}\nAction {step}: search[{words(rng, 2)}]\n"
            example += f"Observation {step}: {words(rng, 20)}\n"
        examples.append(example)
    return instructions + "\n".join(examples) + "\n"


@sgl.function
def react_agent(s, prompt, question, observations, step_tokens):
    s += prompt + "Question: " + question + "\n"
    for step, observation in enumerate(observations, 1):
        s += f"Thought {step}:" + sgl.gen(f"thought_{step}", max_tokens=step_tokens, stop="Observation")
        s += f"Observation {step}: {observation}\n"


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    prompt = _few_shot_prompt(rng, size.prompt_words)
    arguments = [
        {
            "prompt": prompt,
            "question": words(rng, 16) + "?",
            "observations": [words(rng, size.observation_words) for _ in range(size.num_steps)],
            "step_tokens": size.step_tokens,
        }
        for _ in range(size.num_agents)
    ]
    return ProgramWorkload("react", react_agent, arguments, dict(GREEDY_FIXED_LENGTH))
