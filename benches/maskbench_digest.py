"""Digests of every constraint mask over the MaskBench sample, to prove a change leaves masks
bit-identical: run it before and after, then compare the two files.

Each schema file is routed as `maskbench_grammar.py --all` routes it (the FSM path unless the
schema is recursive or the regex path refuses it, then the grammar path) under two readings: the
specification's (as the benchmark) and the engine's default (implied types, free values unrolled
3 levels on the FSM path). For each: a sha256 over the start mask and the mask (and forced bytes)
before each of the first `--mask-tokens` tokens of every test instance, each instance's accept
decision, and short digests of the schema's regex and EBNF text (or the typed error refusing it).

    .venv/bin/python benches/maskbench_digest.py before.json [--vocab cl100k|tekken] [--limit N]
    .venv/bin/python benches/maskbench_digest.py after.json
    .venv/bin/python benches/maskbench_digest.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sglr import errors
from sglr._core import (
    GrammarConstraint,
    TokenFsm,
    fill_grammar_bitmasks,
    json_schema_is_recursive,
    json_schema_to_ebnf,
    json_schema_to_regex,
)

BENCHES = Path(__file__).resolve().parent
READINGS: dict[str, tuple[dict[str, Any], int | None]] = {
    "spec": ({"additional_properties": True, "implied_types": False}, None),
    "engine": ({}, 3),
}


def _oracle():
    spec = importlib.util.spec_from_file_location("maskbench_oracle", BENCHES / "maskbench_oracle.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _refusal(error: errors.ConstraintError) -> str:
    return f"error {type(error).__name__} {getattr(error, 'keyword', '')}"


def _grammar_path(text, vocab, reading, instances, digest, num_masks) -> list | str:
    try:
        grammar = GrammarConstraint.from_json_schema(text, vocab, **reading)
        mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
        fill_grammar_bitmasks([grammar.start()], mask, [0])
        digest.update(mask.tobytes())
    except errors.ConstraintError as error:
        return _refusal(error)
    accepts: list = []
    for tokens in instances:
        try:
            state = grammar.start()
            accepted = True
            for index, token in enumerate(tokens):
                if index < num_masks:
                    fill_grammar_bitmasks([state], mask, [0])
                    digest.update(mask.tobytes())
                    digest.update(state.forced_bytes())
                if not state.try_advance(token):
                    accepted = False
                    break
            accepts.append(accepted and bool(state.is_accepting))
        except errors.ConstraintError as error:
            accepts.append(_refusal(error))
    return accepts


def _fsm_path(text, vocab, reading, max_any_depth, instances, digest, num_masks) -> list | str:
    try:
        fsm = TokenFsm.from_json_schema(text, vocab, max_any_depth=max_any_depth, **reading)
        mask = np.zeros(fsm.num_mask_words, dtype=np.int32)
        fsm.fill_bitmask(fsm.start_state, mask)
        digest.update(mask.tobytes())
    except errors.ConstraintError as error:
        return _refusal(error)
    accepts: list = []
    for tokens in instances:
        state = fsm.start_state
        accepted = True
        for index, token in enumerate(tokens):
            if index < num_masks:
                fsm.fill_bitmask(state, mask)
                digest.update(mask.tobytes())
            digest.update(repr(fsm.jump_forward(state)).encode())
            next_state = fsm.try_advance(state, token)
            if next_state is None:
                accepted = False
                break
            state = next_state
        accepts.append(accepted and bool(fsm.is_accepting(state)))
    return accepts


def _text_digest(compile_text: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    try:
        return hashlib.sha256(compile_text(*args, **kwargs).encode()).hexdigest()[:16]
    except errors.ConstraintError as error:
        return f"{_refusal(error)} {error}"[:300]


def digests(vocab_name: str, limit: int | None, num_masks: int) -> dict[str, dict]:
    oracle = _oracle()
    encoding, vocab = oracle.vocabulary(vocab_name)
    files = oracle.select_files(oracle.data_dir(None), limit)
    result = {}
    for reading_name, (reading, max_any_depth) in READINGS.items():
        for number, path in enumerate(files, 1):
            case = json.loads(path.read_text())
            text = json.dumps(case["schema"])
            instances = [
                encoding.encode(json.dumps(test["data"]), disallowed_special=()) for test in case["tests"]
            ]
            digest = hashlib.sha256()
            recursive = json_schema_is_recursive(text)
            additional = reading.get("additional_properties", False)
            entry: dict[str, Any] = {
                "recursive": recursive,
                "regex": _text_digest(json_schema_to_regex, text, max_any_depth=max_any_depth, **reading),
                "ebnf": _text_digest(json_schema_to_ebnf, text, "root", additional_properties=additional),
            }
            outcome = None
            if not recursive:
                outcome = entry["fsm"] = _fsm_path(
                    text, vocab, reading, max_any_depth, instances, digest, num_masks
                )
            if outcome is None or (
                isinstance(outcome, str) and ("Unsupported" in outcome or "TooLarge" in outcome)
            ):
                entry["grammar"] = _grammar_path(text, vocab, reading, instances, digest, num_masks)
            entry["digest"] = digest.hexdigest()
            result[f"{reading_name}/{path.name}"] = entry
            if number % 200 == 0:
                print(f"[{reading_name}] {number}/{len(files)} files", file=sys.stderr, flush=True)
    return result


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    differing = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
    for key in differing[:20]:
        print(f"differs: {key}")
    print(f"{len(old)} entries before, {len(new)} after, {len(differing)} differing")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", nargs="?", help="where to write the digests (JSON)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two digest files")
    parser.add_argument("--vocab", choices=("cl100k", "tekken"), default="cl100k")
    parser.add_argument("--limit", type=int, default=None, help="this many files, spread over the sample")
    parser.add_argument("--mask-tokens", type=int, default=32, help="masks taken per instance")
    args = parser.parse_args()
    if args.compare:
        return compare(Path(args.compare[0]), Path(args.compare[1]))
    if not args.out:
        parser.error("give an output file, or --compare BEFORE AFTER")
    result = digests(args.vocab, args.limit, args.mask_tokens)
    Path(args.out).write_text(json.dumps(result, indent=0, sort_keys=True))
    print(f"{len(result)} entries written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
