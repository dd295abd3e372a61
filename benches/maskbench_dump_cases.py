"""Writes MaskBench cases for `rust/grammar/examples/mask_profile.rs`: the vocabulary (cl100k_base,
or `--vocab tekken`; hex bytes per token id), EOS, and each named file's schema with its valid instances as token
ids, so a slow schema can be profiled away from Python (`valgrind --tool=callgrind`).

    .venv/bin/python benches/maskbench_dump_cases.py /tmp/cases.json Github_easy---o40228.json ...
    cargo run --release -p sglr-grammar --example mask_profile -- /tmp/cases.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchlib.oracle import load_oracle

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("files", nargs="+", help="MaskBench file names")
    parser.add_argument("--data", default=None)
    parser.add_argument("--vocab", choices=("cl100k", "tekken"), default="cl100k")
    args = parser.parse_args()
    oracle = load_oracle()
    directory = oracle.data_dir(args.data)
    if directory is None:
        sys.exit("MaskBench sample not found")
    encoding, vocabulary = oracle.vocabulary(args.vocab)
    vocab: list[str | None] = []
    for token_id in range(vocabulary.vocab_size):
        token = vocabulary.token_bytes(token_id)
        vocab.append(None if token is None else token.hex())
    cases = []
    for name in args.files:
        case = json.loads((directory / name).read_text())
        instances = [
            encoding.encode(json.dumps(test["data"]), disallowed_special=())
            for test in case["tests"]
            if test["valid"]
        ]
        cases.append({"name": name, "schema": json.dumps(case["schema"]), "instances": instances})
    Path(args.output).write_text(
        json.dumps({"vocab": vocab, "eos": list(vocabulary.eos_token_ids), "cases": cases})
    )


if __name__ == "__main__":
    main()
