"""Grammar-path masks along long documents: arrays of 150-180 elements, unbounded and with
`maxItems` (unrolled into nested optional tails, so every element's parse context is new), fed
token by token through one compiled grammar, twice. Prints the median and 99th percentile mask
time of the first pass, and of the last 200 tokens of the second.

    .venv/bin/python benches/grammar_long_arrays.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import maskbench_oracle
from sglr._core import GrammarConstraint, fill_grammar_bitmasks

CASES = [
    ("array of strings", {"type": "array", "items": {"type": "string"}}, [f"item {i}" for i in range(180)]),
    (
        "array of strings, maxItems 250",
        {"type": "array", "items": {"type": "string"}, "maxItems": 250},
        [f"item {i}" for i in range(180)],
    ),
    (
        "object holding 150 objects, maxItems 200",
        {
            "type": "object",
            "properties": {
                "a": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"x": {"type": "string"}, "y": {"type": "integer"}},
                    },
                    "maxItems": 200,
                }
            },
        },
        {"a": [{"x": f"v{i}", "y": i} for i in range(150)]},
    ),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    encoding, vocab = maskbench_oracle.vocabulary("cl100k")
    mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    print("| document | tokens | pass 1 p50 / p99 us | pass 2, last 200 tokens, p50 / p99 us |")
    print("| --- | ---: | ---: | ---: |")
    for name, schema, document in CASES:
        grammar = GrammarConstraint.from_json_schema(json.dumps(schema), vocab, additional_properties=True)
        tokens = encoding.encode(json.dumps(document))
        passes = []
        for _ in range(2):
            state = grammar.start()
            times = []
            for token in tokens:
                started = time.perf_counter()
                fill_grammar_bitmasks([state], mask, [0])
                times.append((time.perf_counter() - started) * 1e6)
                assert state.try_advance(token), name
            passes.append(times)
        first, last = passes[0], passes[1][-200:]
        print(
            f"| {name} | {len(tokens)} | {percentile(first, 0.5):.1f} / {percentile(first, 0.99):.1f} | "
            f"{percentile(last, 0.5):.1f} / {percentile(last, 0.99):.1f} |"
        )


if __name__ == "__main__":
    main()
