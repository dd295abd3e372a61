"""Why JSON B=8 in `overlap_cpu.py` is not 8/8 identical: greedy JSON-constrained outputs on
SmolLM2 (the bench's schema and prompts), compared across schedules and batch compositions.

Rows: plain batch vs the same plain batch again; plain batch vs each request alone; overlap
batch vs plain batch; overlap alone vs plain alone. When the plain schedule is not reproducible
across two runs of one batch, the differences come from batch composition (constraints compile
on their own thread, so requests join the batch at moments that vary) and float rounding, not
from the overlap schedule; alone (a batch of one, no composition to vary) the schedules agree.

    python benches/overlap_json_identity.py
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    from overlap_cpu import SCHEMA
    from sglr.engine.engine import Engine

    engines = {
        flag: Engine(device="cpu", overlap_schedule=flag, max_running_requests=64) for flag in (False, True)
    }
    try:
        rng = random.Random(0)
        vocab_size = engines[False].tokenizer.vocab_size
        for batch in (1, 8, 32):  # the decode cells' draws come first in overlap_cpu.py
            [[rng.randrange(100, vocab_size - 1) for _ in range(rng.randrange(8, 24))] for _ in range(batch)]
        prompts = [[rng.randrange(100, vocab_size - 1) for _ in range(12)] for _ in range(8)]
        params = {"temperature": 0, "max_new_tokens": 160, "json_schema": json.dumps(SCHEMA)}

        def run(overlap: bool, batch: list[list[int]]) -> list[list[int]]:
            engines[overlap].flush_cache()
            return [
                r["output_ids"] for r in engines[overlap].generate(input_ids=batch, sampling_params=params)
            ]

        plain_batch, plain_again = run(False, prompts), run(False, prompts)
        plain_alone = [run(False, [p])[0] for p in prompts]
        overlap_batch = run(True, prompts)
        overlap_alone = [run(True, [p])[0] for p in prompts]
        print("| comparison | identical of 8 |\n|---|---|")
        for name, a, b in (
            ("plain batch vs plain batch again", plain_batch, plain_again),
            ("plain batch vs plain alone", plain_batch, plain_alone),
            ("overlap batch vs plain batch", overlap_batch, plain_batch),
            ("overlap alone vs plain alone", overlap_alone, plain_alone),
        ):
            print(f"| {name} | {sum(x == y for x, y in zip(a, b, strict=True))} |")
    finally:
        for engine in engines.values():
            engine.shutdown()


if __name__ == "__main__":
    main()
