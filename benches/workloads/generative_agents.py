"""Generative-agents-style: many short calls per agent tick. Each prompt is a template over a long
persona (fixed per agent), a day summary (changes every few ticks) and the tick's observation
(new every tick): arguments that vary at different rates, so prefixes are shared at three depths."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import name, words

SIZES = {
    "smoke": {"num_agents": 2, "num_ticks": 2, "ticks_per_day": 2, "persona_words": 80, "summary_words": 20},
    "cpu": {"num_agents": 8, "num_ticks": 4, "ticks_per_day": 2, "persona_words": 600, "summary_words": 120},
    "gpu": {
        "num_agents": 25,
        "num_ticks": 40,
        "ticks_per_day": 10,
        "persona_words": 800,
        "summary_words": 150,
    },
}


@sgl.function
def agent_tick(s, persona, day_summary, observation):
    s += persona + "\nToday so far: " + day_summary + "\nObservation: " + observation + "\n"
    s += "What does this person do next? Action:" + sgl.gen("action", max_tokens=12, stop="\n") + "\n"
    s += "Should they react to the observation (yes or no)?" + sgl.gen("react", max_tokens=2) + "\n"
    s += "What do they say, in one sentence?" + sgl.gen("utterance", max_tokens=16, stop="\n")


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    personas = [
        f"Name: {name(rng)} {agent}. " + words(rng, size.persona_words) for agent in range(size.num_agents)
    ]
    arguments = []
    for tick in range(size.num_ticks):
        if tick % size.ticks_per_day == 0:
            summaries = [words(rng, size.summary_words) for _ in personas]
        for persona, summary in zip(personas, summaries, strict=True):
            arguments.append({"persona": persona, "day_summary": summary, "observation": words(rng, 30)})
    return ProgramWorkload("generative-agents", agent_tick, arguments, dict(GREEDY_FIXED_LENGTH))
