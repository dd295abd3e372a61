"""Compile and mask cost of objects whose declared properties come in any order, by width:
`num` integer properties (half required), ordered and in any order, closed or open
(`additionalProperties: true`), or cut by `maxProperties: 3`. Compile = grammar built + first
mask at cl100k_base; masks: every token of one instance written in reverse schema order (any
order) or in schema order (ordered). Past the bound the grammar path refuses by name.

    .venv/bin/python benches/schema_any_order.py [--widths 4 8 10 12 13 20 40]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.oracle import load_oracle
from sglr import errors
from sglr._core import GrammarConstraint, fill_grammar_bitmasks

HERE = Path(__file__).resolve().parent


def schema_of(num: int, variant: str) -> dict:
    schema: dict = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "integer"} for i in range(num)},
        "required": [f"field_{i}" for i in range(0, num, 2)],
        "additionalProperties": variant == "open",
    }
    if variant == "max3":
        schema["maxProperties"] = 3
        schema["required"] = ["field_0"]
    return schema


def measure(schema: dict, any_order: bool, encoding: Any, vocab: Any) -> str:
    started = time.perf_counter()
    try:
        grammar = GrammarConstraint.from_json_schema(
            json.dumps(schema), vocab, properties_any_order=any_order
        )
        state = grammar.start()
        mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
        fill_grammar_bitmasks([state], mask, [0])
    except errors.UnsupportedSchemaError as error:
        return f"refused ({error.keyword})"
    compile_ms = (time.perf_counter() - started) * 1e3
    keys = list(schema["properties"])[: schema.get("maxProperties", len(schema["properties"]))]
    instance = {key: i for i, key in enumerate(reversed(keys) if any_order else keys)}
    timings = []
    for token in encoding.encode(json.dumps(instance)):
        started = time.perf_counter()
        fill_grammar_bitmasks([state], mask, [0])
        timings.append((time.perf_counter() - started) * 1e6)
        assert state.try_advance(token), instance
    assert state.is_accepting, instance
    timings.sort()
    p50, p99 = timings[len(timings) // 2], timings[min(len(timings) - 1, int(0.99 * len(timings)))]
    return f"{compile_ms:8.1f} ms, {grammar.num_rules:6d} rules, mask p50 {p50:6.0f} us p99 {p99:6.0f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="*", default=[4, 8, 10, 12, 13, 20, 40])
    args = parser.parse_args()
    encoding, vocab = load_oracle().vocabulary("cl100k")
    for variant in ("closed", "open", "max3"):
        for num in args.widths:
            for any_order in (False, True):
                schema = schema_of(num, variant)
                result = measure(schema, any_order, encoding, vocab)
                order = "any order" if any_order else "ordered"
                print(f"{variant:>6} {num:3d} {order:>9}: {result}")


if __name__ == "__main__":
    main()
