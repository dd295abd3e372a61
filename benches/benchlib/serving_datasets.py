"""Synthetic serving workloads, generated locally and seeded (no downloads).

- random: prompts of random token ids, input and output lengths uniform in
  [range_ratio * len, len] (the usual serving-benchmark "random" dataset);
- generated-shared-prefix: G groups, each a shared system prompt of S tokens followed by Q
  questions of L tokens; every request asks for O output tokens (prefix-cache friendly).

A request carries its prompt both as token ids (native API, completions) and as text of
pseudo-words (chat, where the prompt must be text); lengths are counted in token ids.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe")


@dataclass(frozen=True)
class BenchRequest:
    prompt_ids: list[int]
    prompt_text: str
    output_len: int


def _ids(rng: random.Random, length: int, vocab_size: int) -> list[int]:
    # Skip the lowest ids: special tokens usually live there.
    return [rng.randrange(min(300, vocab_size // 4), vocab_size) for _ in range(length)]


def _text(rng: random.Random, num_words: int) -> str:
    return " ".join(
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randrange(1, 4))) for _ in range(num_words)
    )


def random_dataset(
    num_prompts: int, input_len: int, output_len: int, range_ratio: float, vocab_size: int, seed: int
) -> list[BenchRequest]:
    rng = random.Random(seed)
    requests = []
    for _ in range(num_prompts):
        n_in = rng.randint(max(1, int(input_len * range_ratio)), input_len)
        n_out = rng.randint(max(1, int(output_len * range_ratio)), output_len)
        requests.append(BenchRequest(_ids(rng, n_in, vocab_size), _text(rng, n_in), n_out))
    return requests


def shared_prefix_dataset(
    num_groups: int,
    prompts_per_group: int,
    system_len: int,
    question_len: int,
    output_len: int,
    vocab_size: int,
    seed: int,
) -> list[BenchRequest]:
    rng = random.Random(seed)
    requests = []
    for _ in range(num_groups):
        system_ids, system_text = _ids(rng, system_len, vocab_size), _text(rng, system_len)
        for _ in range(prompts_per_group):
            question_ids, question_text = _ids(rng, question_len, vocab_size), _text(rng, question_len)
            requests.append(
                BenchRequest(system_ids + question_ids, system_text + "\n" + question_text, output_len)
            )
    rng.shuffle(requests)
    return requests
