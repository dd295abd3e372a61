"""Memory and mask time of a long string value with a large `maxLength` on the grammar path.

For each case: compile the schema (grammar path, cl100k_base), then feed one document whose
long string is `--chars` characters of text (or the schema's `maxLength`, if smaller), filling
the mask before every token. Reports the process RSS growth over the walk, the matcher's own
`memory_bytes` and memoised lexeme masks (where the extension has them), and mask times.

    PYTHONPATH=python:benches .venv/bin/python benches/counted_string_memory.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from maskbench_grammar import load_oracle
from sglr import errors
from sglr._core import GrammarConstraint, fill_grammar_bitmasks

WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "tempor"]


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def text_of(chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(WORDS) + rng.choice([" ", " ", ", ", ".\n", " "])
        parts.append(word)
        length += len(word)
    return "".join(parts)[:chars]


def cases(directory: Path, chars: int) -> list[tuple[str, dict, str, int]]:
    """(name, schema, key of the long string, its length)."""
    out = []
    for stem, key in [("Github_medium---o9869", "sslCert"), ("Github_easy---o9931", "templateContext")]:
        schema = json.loads((directory / f"{stem}.json").read_text())["schema"]
        out.append((stem, schema, key, min(chars, schema["properties"][key]["maxLength"])))
    huge = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 50, "maxLength": 1_000_000}},
        "required": ["text"],
        "additionalProperties": False,
    }
    out.append(("maxLength 1,000,000", huge, "text", chars))
    return out


def run(name: str, schema: dict, key: str, chars: int, encoding: Any, vocab: Any) -> dict:
    before = rss_bytes()
    started = time.perf_counter()
    try:
        grammar = GrammarConstraint.from_json_schema(json.dumps(schema), vocab, additional_properties=True)
    except errors.ConstraintError as error:
        return {"case": name, "error": type(error).__name__}
    compile_ms = (time.perf_counter() - started) * 1e3
    document = json.dumps({key: text_of(chars)})
    # json.dumps escapes the newlines: count characters of the decoded value.
    tokens = encoding.encode(document, disallowed_special=())
    mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    state = grammar.start()
    timings = []
    try:
        for token in tokens:
            started = time.perf_counter()
            fill_grammar_bitmasks([state], mask, [0])
            timings.append(time.perf_counter() - started)
            if not (int(mask[0, token >> 5]) >> (token & 31)) & 1 or not state.try_advance(token):
                return {"case": name, "error": f"token refused after {state.num_bytes} bytes"}
    except errors.ConstraintError as error:
        return {"case": name, "error": f"while decoding: {type(error).__name__}"}
    times = np.array(timings) * 1e6
    return {
        "case": name,
        "chars": chars,
        "tokens": len(tokens),
        "accepted": bool(state.is_accepting),
        "compile_ms": round(compile_ms, 2),
        "rss_growth_mib": round((rss_bytes() - before) / 2**20, 1),
        "memory_mib": round(getattr(grammar, "memory_bytes", -(2**20)) / 2**20, 2),
        "lexeme_masks": getattr(grammar, "num_lexeme_masks", None),
        "mask_p50_us": round(float(np.percentile(times, 50)), 1),
        "mask_p99_us": round(float(np.percentile(times, 99)), 1),
        "mask_total_s": round(float(times.sum()) / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=32_767, help="length of the long string")
    parser.add_argument("--data", default=None, help="the MaskBench sample's directory")
    args = parser.parse_args()
    oracle = load_oracle()
    directory = oracle.data_dir(args.data)
    if directory is None:
        raise SystemExit("MaskBench sample not found (--data)")
    encoding, vocab = oracle.cl100k()
    for name, schema, key, chars in cases(directory, args.chars):
        print(json.dumps(run(name, schema, key, chars, encoding, vocab)), flush=True)


if __name__ == "__main__":
    main()
