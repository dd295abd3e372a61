"""Instances with their objects' keys shuffled (MaskBench under `--any-order`): the same JSON
value, so a schema's verdict on it is the same, whatever order a constraint expected."""

from __future__ import annotations

import random
from typing import Any


def shuffled(value: Any, rng: random.Random) -> Any:
    """`value` with every object's keys (at any depth) in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def with_shuffled_keys(tests: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """`tests` followed by a copy of each whose keys came out in another order (same verdict)."""
    rng = random.Random(seed)
    copies = []
    for test in tests:
        data = shuffled(test["data"], rng)
        if repr(data) != repr(test["data"]):
            copies.append({**test, "data": data})
    return tests + copies
