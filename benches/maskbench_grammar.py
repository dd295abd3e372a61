"""MaskBench sample through the grammar path, for the schemas the regex path cannot hold: those
with a `$ref` cycle (the regex path unrolls them 3 levels) and those it refuses as too large.

For each such schema file: the regex path's outcome (as `maskbench_oracle.py` computes it) and
the grammar path's (`GrammarConstraint.from_json_schema`, undeclared properties allowed and
typeless keywords constraining only their own type, as the oracle and the specification read
schemas; `--implied-types` for the engine's default reading instead): valid instances must be accepted, invalid ones rejected (a false accept is a
bug), unsupported keywords refused with a typed error. Times: compile + first mask, and the
mask fill per token (first `--mask-tokens` tokens of each instance; the rest only advance).

    .venv/bin/python benches/maskbench_grammar.py              # recursive schemas only
    .venv/bin/python benches/maskbench_grammar.py --too-large  # also try regex-path refusals
    .venv/bin/python benches/maskbench_grammar.py --all        # every file, routed as the engine does

`--all` routes each schema as `ConstraintCompiler` does: a `$ref` cycle, or a regex-path refusal
(unsupported keyword, too large), goes to the grammar path; the rest stays on the FSM. Values a
schema leaves free (`{}`, undeclared members) nest to any depth, as the schema says, so the FSM
path refuses them (`JsonSchemaConfig(max_any_depth=None)`); `--max-any-depth 3` measures the
engine's default instead (the FSM unrolls them 3 levels: a subset, false rejects beyond). It
reports the combined outcome (pass / fail / refused), false accepts and false rejects (valid
instances rejected even in schema key order), compile + first mask and per-token mask times per
path and combined (mask fill only, the first `--mask-tokens` tokens of each instance).
`--any-order` (`--all`): properties in any order, instances also with keys shuffled, no reordering.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.oracle import load_oracle
from sglr import errors
from sglr._core import GrammarConstraint, Vocabulary, fill_grammar_bitmasks, json_schema_is_recursive

HERE = Path(__file__).resolve().parent

# How schemas are read: as the specification does (set by `main`, `--implied-types`).
SCHEMA_READING = {"additional_properties": True, "implied_types": False, "properties_any_order": False}


def feed(
    grammar: GrammarConstraint, tokens: list[int], mask: np.ndarray, timed: int, timings: list[float]
) -> bool:
    state = grammar.start()
    for index, token in enumerate(tokens):
        if index < timed:
            started = time.perf_counter()
            fill_grammar_bitmasks([state], mask, [0])
            timings.append(time.perf_counter() - started)
            if not (int(mask[0, token >> 5]) >> (token & 31)) & 1:
                return False
        if not state.try_advance(token):
            return False
    return bool(state.is_accepting)


def check_grammar(case: dict, encoding: Any, vocab: Vocabulary, oracle: Any, mask_tokens: int) -> dict:
    result: dict[str, Any] = {"outcome": "passing", "valid_rejected": 0, "invalid_accepted": 0, "steps": []}
    started = time.perf_counter()
    try:
        grammar = GrammarConstraint.from_json_schema(json.dumps(case["schema"]), vocab, **SCHEMA_READING)
        mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
        fill_grammar_bitmasks([grammar.start()], mask, [0])
    except errors.UnsupportedSchemaError as error:
        return {"outcome": "refused", "detail": error.keyword}
    except errors.ConstraintTooLargeError:
        return {"outcome": "too_large"}
    except errors.ConstraintError as error:
        return {"outcome": "error", "detail": f"{type(error).__name__}: {error}"[:120]}
    result["compile_s"] = time.perf_counter() - started
    for test in case["tests"]:
        text = json.dumps(test["data"])
        try:
            accepted = feed(
                grammar, encoding.encode(text, disallowed_special=()), mask, mask_tokens, result["steps"]
            )
        except errors.ConstraintError as error:
            # A lexeme built on first use can still be too large: a typed error mid-document.
            return {"outcome": "error", "detail": f"while decoding: {type(error).__name__}"}
        if test["valid"] and not accepted:
            reordered = json.dumps(oracle.reorder_like_schema(test["data"], case["schema"], case["schema"]))
            if reordered == text or not feed(
                grammar, encoding.encode(reordered, disallowed_special=()), mask, 0, []
            ):
                result["valid_rejected"] += 1
        elif not test["valid"] and accepted:
            result["invalid_accepted"] += 1
    if result["valid_rejected"] or result["invalid_accepted"]:
        result["outcome"] = "failing"
    result["memory_bytes"] = grammar.memory_bytes
    return result


def feed_fsm(fsm: Any, tokens: list[int], mask: np.ndarray, timed: int, timings: list[float]) -> bool:
    state = fsm.start_state
    for index, token in enumerate(tokens):
        if index < timed:
            started = time.perf_counter()
            fsm.fill_bitmask(state, mask)
            timings.append(time.perf_counter() - started)
        next_state = fsm.try_advance(state, token)
        if next_state is None:
            return False
        state = next_state
    return bool(fsm.is_accepting(state))


def check_fsm(
    case: dict, encoding: Any, vocab: Vocabulary, oracle: Any, mask_tokens: int, max_any_depth: int | None
) -> dict:
    """The FSM path with the same accounting as `check_grammar`; `max_any_depth` None: values
    the schema leaves free nest to any depth, so the FSM path refuses them (grammar path)."""
    from sglr._core import TokenFsm

    result: dict[str, Any] = {"outcome": "passing", "valid_rejected": 0, "invalid_accepted": 0, "steps": []}
    started = time.perf_counter()
    try:
        fsm = TokenFsm.from_json_schema(
            json.dumps(case["schema"]), vocab, max_any_depth=max_any_depth, **SCHEMA_READING
        )
        mask = np.zeros(fsm.num_mask_words, dtype=np.int32)
        fsm.fill_bitmask(fsm.start_state, mask)
    except errors.UnsupportedSchemaError as error:
        return {"outcome": "refused", "detail": error.keyword}
    except errors.ConstraintTooLargeError:
        return {"outcome": "too_large"}
    except errors.ConstraintError as error:
        return {"outcome": "error", "detail": f"{type(error).__name__}: {error}"[:120]}
    result["compile_s"] = time.perf_counter() - started
    for test in case["tests"]:
        text = json.dumps(test["data"])
        accepted = feed_fsm(
            fsm, encoding.encode(text, disallowed_special=()), mask, mask_tokens, result["steps"]
        )
        if test["valid"] and not accepted:
            reordered = json.dumps(oracle.reorder_like_schema(test["data"], case["schema"], case["schema"]))
            if reordered == text or not feed_fsm(
                fsm, encoding.encode(reordered, disallowed_special=()), mask, 0, []
            ):
                result["valid_rejected"] += 1
        elif not test["valid"] and accepted:
            result["invalid_accepted"] += 1
    if result["valid_rejected"] or result["invalid_accepted"]:
        result["outcome"] = "failing"
    result["memory_bytes"] = fsm.stats()["memory_bytes"]
    return result


def run_all(args: argparse.Namespace, oracle: Any, directory: Path) -> None:
    from benchlib.shuffled_keys import with_shuffled_keys  # the script's folder is on the path

    encoding, vocab = oracle.vocabulary(args.vocab)
    outcomes: dict[str, Counter[str]] = {"fsm": Counter(), "grammar": Counter(), "combined": Counter()}
    refusals: Counter[str] = Counter()
    compile_ms: dict[str, list[float]] = {"fsm": [], "grammar": []}
    steps_us: dict[str, list[float]] = {"fsm": [], "grammar": []}
    # Per compiled schema after its instances: the matcher's own memory (lexeme DFAs, memoised
    # masks; FSM: table and rows built), not the vocabulary's shared caches.
    memory_mib: dict[str, list[float]] = {"fsm": [], "grammar": []}
    false_accepts = false_rejects = num_valid = num_invalid = 0
    files = oracle.select_files(directory, args.limit)
    if args.only:
        files = [path for path in files if any(part in path.name for part in args.only)]
    per_file: list[dict[str, Any]] = []
    for path in files:
        case = json.loads(path.read_text())
        if args.any_order:
            case["tests"] = with_shuffled_keys(case["tests"], seed=len(per_file))
        text = json.dumps(case["schema"])
        result = None
        if not json_schema_is_recursive(text):
            result = check_fsm(case, encoding, vocab, oracle, args.mask_tokens, args.max_any_depth)
            outcomes["fsm"][result["outcome"]] += 1
            route = "fsm"
        if result is None or result["outcome"] in ("refused", "too_large"):
            result = check_grammar(case, encoding, vocab, oracle, args.mask_tokens)
            outcomes["grammar"][result["outcome"]] += 1
            route = "grammar"
        outcomes["combined"][result["outcome"]] += 1
        if result["outcome"] == "refused":
            refusals[result["detail"]] += 1
        if result["outcome"] == "error":
            print(f"  {path.name}: {result['detail']}")
        if "compile_s" in result:
            num_valid += sum(t["valid"] for t in case["tests"])
            num_invalid += sum(not t["valid"] for t in case["tests"])
            false_accepts += result["invalid_accepted"]
            false_rejects += result["valid_rejected"]
            compile_ms[route].append(result["compile_s"] * 1e3)
            if "memory_bytes" in result:
                memory_mib[route].append(result["memory_bytes"] / (1 << 20))
            steps_us[route].extend(s * 1e6 for s in result["steps"])
            per_file.append(
                {
                    "file": path.name,
                    "route": route,
                    "compile_ms": result["compile_s"] * 1e3,
                    "mask_us": [s * 1e6 for s in result["steps"]],
                }
            )
            if result["invalid_accepted"]:
                print(f"  FALSE ACCEPT {path.name} ({route})")
    p = oracle.percentile
    print(f"files: {len(files)} from {directory}; vocabulary {encoding.name} ({vocab.vocab_size} tokens)")
    for name, counter in outcomes.items():
        print(f"{name:>9}: {dict(counter.most_common())}")
    print(f"refused by keyword (combined): {dict(refusals.most_common(12))}")
    print(
        f"compiled schemas' instances: valid {num_valid}, rejected {false_rejects}; "
        f"invalid {num_invalid}, accepted {false_accepts}"
    )
    rows = [
        ("fsm", compile_ms["fsm"], steps_us["fsm"]),
        ("grammar", compile_ms["grammar"], steps_us["grammar"]),
    ]
    rows.append(
        ("combined", compile_ms["fsm"] + compile_ms["grammar"], steps_us["fsm"] + steps_us["grammar"])
    )
    print(
        f"{'path':>9} {'schemas':>8} {'compile p50 ms':>15} {'p99 ms':>8} {'masks':>8} {'mask p50 us':>12} {'p99 us':>8}"
    )
    for name, compiles, steps in rows:
        if compiles:
            print(
                f"{name:>9} {len(compiles):>8} {p(compiles, 0.5):>15.2f} {p(compiles, 0.99):>8.2f} "
                f"{len(steps):>8} {p(steps, 0.5):>12.1f} {p(steps, 0.99):>8.1f}"
            )
    for name in ("fsm", "grammar"):
        if memory_mib[name]:
            values = memory_mib[name]
            print(
                f"{name:>9} memory per compiled schema: p50 {p(values, 0.5):.2f} MiB, "
                f"p99 {p(values, 0.99):.2f} MiB, max {max(values):.2f} MiB"
            )
    if args.slowest:
        print_slowest(per_file, args.slowest)
    if args.dump:
        Path(args.dump).write_text(json.dumps(per_file))


def print_slowest(per_file: list[dict[str, Any]], count: int) -> None:
    """The schemas that make the compile p99, and those holding the most masks past 1 ms (mask
    index = position among the file's timed masks, instances concatenated)."""
    print(f"slowest {count} compiles (ms):")
    for entry in sorted(per_file, key=lambda e: -e["compile_ms"])[:count]:
        print(f"  {entry['compile_ms']:9.2f}  {entry['route']:>7}  {entry['file']}")
    slow = [(e, [i for i, t in enumerate(e["mask_us"]) if t > 1000]) for e in per_file]
    print("files with the most masks over 1 ms (count, max us, first indices):")
    for entry, indices in sorted(slow, key=lambda pair: -len(pair[1]))[:count]:
        if indices:
            worst = max(entry["mask_us"])
            print(f"  {len(indices):5d} {worst:9.0f}  {entry['route']:>7}  {entry['file']}  {indices[:8]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None)
    parser.add_argument(
        "--too-large", action="store_true", help="also schemas the regex path refuses as too large"
    )
    parser.add_argument("--mask-tokens", type=int, default=32, help="tokens per instance whose mask is timed")
    parser.add_argument("--all", action="store_true", help="every file, routed as the engine routes it")
    parser.add_argument("--limit", type=int, default=None, help="with --all: this many files, spread evenly")
    parser.add_argument(
        "--max-any-depth",
        type=int,
        default=None,
        help="with --all: unroll free values this deep on the FSM path (default: any depth, grammar path)",
    )
    parser.add_argument("--only", nargs="*", help="with --all: files whose name holds one of these")
    parser.add_argument(
        "--vocab", choices=("cl100k", "tekken"), default="cl100k",
        help="cl100k_base (100k ids) or tekken (131k ids; its wheel is fetched once, see benchlib/tekken.py)",
    )  # fmt: skip
    parser.add_argument("--slowest", type=int, default=0, help="with --all: print this many slowest schemas")
    parser.add_argument("--dump", default=None, help="with --all: write per-file compile/mask times (JSON)")
    parser.add_argument(
        "--implied-types",
        action="store_true",
        help="typeless keywords imply their type (the engine's default) instead of the specification's reading",
    )
    parser.add_argument("--any-order", action="store_true", help="with --all: properties in any order")
    args = parser.parse_args()
    SCHEMA_READING.update(implied_types=args.implied_types, properties_any_order=args.any_order)
    oracle = load_oracle()
    if args.any_order:  # no second chance in schema order: every valid instance rejected counts
        oracle.reorder_like_schema = lambda data, *_: data
    directory = oracle.data_dir(args.data)
    if directory is None:
        sys.exit("MaskBench sample not found")
    if args.all:
        run_all(args, oracle, directory)
        return
    encoding, vocab = oracle.vocabulary(args.vocab)
    regex_outcomes: Counter[str] = Counter()
    grammar_outcomes: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    compile_ms: list[float] = []
    steps_us: list[float] = []
    false_accepts = 0
    for path in oracle.select_files(directory, None):
        case = json.loads(path.read_text())
        recursive = json_schema_is_recursive(json.dumps(case["schema"]))
        if not recursive and not args.too_large:
            continue
        regex = oracle.check_file(path, encoding, vocab)
        if not recursive and regex.outcome != "too_large":
            continue
        regex_outcomes[regex.outcome] += 1
        grammar = check_grammar(case, encoding, vocab, oracle, args.mask_tokens)
        grammar_outcomes[grammar["outcome"]] += 1
        if grammar["outcome"] == "refused":
            refusals[grammar["detail"]] += 1
        if grammar["outcome"] == "error":
            print(f"  {path.name}: {grammar['detail']}")
        false_accepts += grammar.get("invalid_accepted", 0)
        if "compile_s" in grammar:
            compile_ms.append(grammar["compile_s"] * 1e3)
            steps_us.extend(s * 1e6 for s in grammar["steps"])
    p = oracle.percentile
    print(f"files: {sum(regex_outcomes.values())}")
    print(f"regex path:   {dict(regex_outcomes)}")
    print(f"grammar path: {dict(grammar_outcomes)}; refused by keyword: {dict(refusals.most_common(8))}")
    print(f"grammar false accepts (invalid instances accepted): {false_accepts}")
    if compile_ms:
        print(f"grammar compile + first mask ms: p50 {p(compile_ms, 0.5):.2f}  p99 {p(compile_ms, 0.99):.2f}")
    if steps_us:
        print(
            f"grammar mask per token us: p50 {p(steps_us, 0.5):.0f}  p99 {p(steps_us, 0.99):.0f}  ({len(steps_us)} masks)"
        )


if __name__ == "__main__":
    main()
