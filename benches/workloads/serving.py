"""Serving datasets sent to sglr-server over HTTP (native /generate, streaming, all at once):
random token ids, and generated-shared-prefix groups (a long system prompt per group)."""

from __future__ import annotations

from benchlib.serving_datasets import random_dataset, shared_prefix_dataset
from workloads.base import ServingWorkload, sized

RANDOM_SIZES = {
    "smoke": {"num_prompts": 4, "input_len": 64, "output_len": 8},
    "cpu": {"num_prompts": 32, "input_len": 512, "output_len": 32},
    "gpu": {"num_prompts": 1000, "input_len": 1024, "output_len": 256},
}
SHARED_PREFIX_SIZES = {
    "smoke": {"num_groups": 2, "prompts_per_group": 2, "system_len": 64, "question_len": 16, "output_len": 8},
    "cpu": {
        "num_groups": 4,
        "prompts_per_group": 16,
        "system_len": 2048,
        "question_len": 128,
        "output_len": 16,
    },
    "gpu": {
        "num_groups": 64,
        "prompts_per_group": 16,
        "system_len": 2048,
        "question_len": 128,
        "output_len": 256,
    },
}
# Input and output lengths of the random dataset are uniform in [ratio * len, len].
RANGE_RATIO = 0.5


def build_random(profile: str, seed: int, vocab_size: int) -> ServingWorkload:
    size = sized(RANDOM_SIZES, profile)
    requests = random_dataset(
        size.num_prompts, size.input_len, size.output_len, RANGE_RATIO, vocab_size, seed
    )
    return ServingWorkload("serving-random", requests)


def build_shared_prefix(profile: str, seed: int, vocab_size: int) -> ServingWorkload:
    size = sized(SHARED_PREFIX_SIZES, profile)
    requests = shared_prefix_dataset(
        size.num_groups,
        size.prompts_per_group,
        size.system_len,
        size.question_len,
        size.output_len,
        vocab_size,
        seed,
    )
    return ServingWorkload("serving-shared-prefix", requests)
