"""Multi-turn chat: sessions of 4 turns, each turn 256-512 new user tokens, with short (4-8 tokens)
or long (256-512 tokens) answers. Every turn's prompt is the whole conversation so far."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import between, words

SIZES = {
    "smoke": {
        "num_sessions": 3,
        "num_turns": 2,
        "input_words": (30, 60),
        "short_output": (4, 8),
        "long_output": (8, 16),
    },
    "cpu": {
        "num_sessions": 12,
        "num_turns": 4,
        "input_words": (256, 512),
        "short_output": (4, 8),
        "long_output": (256, 512),
    },
    "gpu": {
        "num_sessions": 256,
        "num_turns": 4,
        "input_words": (256, 512),
        "short_output": (4, 8),
        "long_output": (256, 512),
    },
}
# Long answers decode ~40x more tokens per turn than short ones: fewer sessions keep the CPU
# profile's run time in proportion.
LONG_SESSIONS_DIVISOR = {"smoke": 1, "cpu": 3, "gpu": 2}


@sgl.function
def chat_session(s, questions, answer_lens):
    for turn, (question, answer_len) in enumerate(zip(questions, answer_lens, strict=True)):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen(f"answer_{turn}", max_tokens=answer_len))


def _build(profile: str, seed: int, long_answers: bool) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    output = size.long_output if long_answers else size.short_output
    num_sessions = size.num_sessions // LONG_SESSIONS_DIVISOR[profile] if long_answers else size.num_sessions
    arguments = [
        {
            "questions": [words(rng, between(rng, *size.input_words)) for _ in range(size.num_turns)],
            "answer_lens": [between(rng, *output) for _ in range(size.num_turns)],
        }
        for _ in range(num_sessions)
    ]
    name = "multi-turn-long" if long_answers else "multi-turn-short"
    return ProgramWorkload(name, chat_session, arguments, dict(GREEDY_FIXED_LENGTH))


def build_short(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    return _build(profile, seed, long_answers=False)


def build_long(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    return _build(profile, seed, long_answers=True)
