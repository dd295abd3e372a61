"""MaskBench sample through the reference engines (llguidance, xgrammar), each compiling the
JSON schema natively, with the accounting of `maskbench_grammar.py --all`, so their figures sit
next to sglr's from the same machine and session.

Per file: compile + first mask (ms), then each instance (`json.dumps`, cl100k_base) fed token by
token, the mask filled and timed for the first `--mask-tokens` tokens, EOS at the end: a valid
instance must be accepted (else a false reject, unless the schema's key order accepts it), an
invalid one rejected (else a false accept). Undeclared properties are allowed, as the spec reads
schemas (xgrammar: `strict_mode=False`), and whitespace as `json.dumps` writes it. The engines
are not in the project's environment: install them beside it, for example

    pip install --no-deps --target /tmp/fsm-deps llguidance xgrammar apache-tvm-ffi
    PYTHONPATH=/tmp/fsm-deps:python .venv/bin/python benches/maskbench_engines.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsm_patterns import cl100k_vocab_case, tekken_vocab_case
from maskbench_grammar import load_oracle


class LLGuidance:
    name = "llguidance"

    def __init__(self, case: Any) -> None:
        import llguidance
        import llguidance.tiktoken

        self.llguidance = llguidance
        self.tokenizer = llguidance.tiktoken.lltokenizer_from_encoding(
            case.tiktoken_encoding, n_vocab=case.size, eos_token=case.eos
        )

    def compile(self, schema: dict) -> Any:
        # `json.dumps` layout (its separators; `\u` escapes of any character, as it writes
        # non-ASCII text), as sglr's `[ ]?` whitespace admits it.
        options = {
            "whitespace_flexible": False,
            "item_separator": ", ",
            "key_separator": ": ",
            "json_allow_general_unicode_escapes": True,
        }
        if isinstance(schema, dict):
            schema = {**schema, "x-guidance": options}
        grammar = self.llguidance.grammar_from("json_schema", json.dumps(schema))
        matcher = _LLGuidanceMatcher(self.llguidance.LLMatcher(self.tokenizer, grammar), grammar)
        if matcher.current.is_error():
            raise ValueError(matcher.current.get_error())
        return matcher

    def reset(self, matcher: Any) -> None:
        # NOTE: `LLMatcher.reset` keeps an error state: after one refused token every later
        # instance of the schema would be refused at its first token (measured: 464 false
        # rejects of 2,392 valid instances came from that), so a matcher in error is rebuilt.
        if matcher.current.is_error():
            matcher.current = self.llguidance.LLMatcher(self.tokenizer, matcher.grammar)
        else:
            matcher.current.reset()

    def fill(self, matcher: Any, mask: np.ndarray) -> None:
        matcher.current.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)

    def advance(self, matcher: Any, token: int) -> bool:
        return bool(matcher.current.consume_token(token)) and not matcher.current.is_error()


class _LLGuidanceMatcher:
    """An `LLMatcher` and its grammar (to build a new one after an error)."""

    def __init__(self, current: Any, grammar: str) -> None:
        self.current = current
        self.grammar = grammar


class XGrammar:
    name = "xgrammar"

    def __init__(self, case: Any) -> None:
        import xgrammar

        self.xgrammar = xgrammar
        raw = [token or b"" for token in case.token_bytes]
        info = xgrammar.TokenizerInfo(
            raw, xgrammar.VocabType.RAW, vocab_size=case.size, stop_token_ids=[case.eos]
        )
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema: dict) -> Any:
        compiled = self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(", ", ": "), strict_mode=False
        )
        return self.xgrammar.GrammarMatcher(compiled)

    def reset(self, matcher: Any) -> None:
        matcher.reset()

    def fill(self, matcher: Any, mask: np.ndarray) -> None:
        matcher.fill_next_token_bitmask(mask.reshape(1, -1))

    def advance(self, matcher: Any, token: int) -> bool:
        return bool(matcher.accept_token(token))


ENGINES = {"llguidance": LLGuidance, "xgrammar": XGrammar}


def feed(
    engine: Any, matcher: Any, tokens: list[int], eos: int, mask: np.ndarray, timed: int, steps: list[float]
) -> bool:
    engine.reset(matcher)
    for index, token in enumerate(tokens):
        if index < timed:
            started = time.perf_counter()
            engine.fill(matcher, mask)
            steps.append(time.perf_counter() - started)
        if not engine.advance(matcher, token):
            return False
    return engine.advance(matcher, eos)


def run(
    engine: Any,
    files: list[Path],
    encoding: Any,
    eos: int,
    size: int,
    oracle: Any,
    mask_tokens: int,
    ensure_ascii: bool = True,
) -> None:
    outcomes: Counter[str] = Counter()
    compile_ms: list[float] = []
    steps: list[float] = []
    false_accepts = false_rejects = num_valid = num_invalid = 0
    mask = np.zeros((size + 31) // 32, dtype=np.int32)
    for path in files:
        case = json.loads(path.read_text())
        started = time.perf_counter()
        try:
            matcher = engine.compile(case["schema"])
            engine.fill(matcher, mask)
        except Exception:  # each engine refuses in its own way
            outcomes["refused or error"] += 1
            continue
        compile_ms.append((time.perf_counter() - started) * 1e3)
        rejected = accepted = 0
        for test in case["tests"]:
            text = json.dumps(test["data"], ensure_ascii=ensure_ascii)
            ok = feed(
                engine, matcher, encoding.encode(text, disallowed_special=()), eos, mask, mask_tokens, steps
            )
            if test["valid"]:
                num_valid += 1
                if not ok:
                    reordered = json.dumps(
                        oracle.reorder_like_schema(test["data"], case["schema"], case["schema"]),
                        ensure_ascii=ensure_ascii,
                    )
                    tokens = encoding.encode(reordered, disallowed_special=())
                    if reordered == text or not feed(engine, matcher, tokens, eos, mask, 0, []):
                        rejected += 1
            else:
                num_invalid += 1
                accepted += ok
        false_accepts += accepted
        false_rejects += rejected
        outcomes["failing" if rejected or accepted else "passing"] += 1
    p = oracle.percentile
    us = [s * 1e6 for s in steps]
    print(f"{engine.name}: {dict(outcomes.most_common())}")
    print(
        f"  instances of compiled schemas: valid {num_valid}, rejected {false_rejects}; "
        f"invalid {num_invalid}, accepted {false_accepts}"
    )
    if compile_ms:
        print(
            f"  schemas {len(compile_ms)}  compile + first mask ms: p50 {p(compile_ms, 0.5):.2f}  "
            f"p99 {p(compile_ms, 0.99):.2f}  max {max(compile_ms):.1f};  masks {len(us)}: "
            f"p50 {p(us, 0.5):.1f} us  p99 {p(us, 0.99):.1f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--limit", type=int, default=None, help="this many files, spread evenly")
    parser.add_argument("--mask-tokens", type=int, default=32, help="tokens per instance whose mask is timed")
    parser.add_argument("--engines", nargs="*", default=list(ENGINES))
    parser.add_argument(
        "--utf8",
        action="store_true",
        help="write instances' non-ASCII text as UTF-8 (json.dumps ensure_ascii=False), not as \\u escapes",
    )
    parser.add_argument(
        "--vocab", choices=("cl100k", "tekken"), default="cl100k",
        help="cl100k_base (100k ids) or tekken (131k ids; its wheel is fetched once, see benchlib/tekken.py)",
    )  # fmt: skip
    args = parser.parse_args()
    oracle = load_oracle()
    directory = oracle.data_dir(args.data)
    if directory is None:
        sys.exit("MaskBench sample not found")
    case = tekken_vocab_case() if args.vocab == "tekken" else cl100k_vocab_case()
    files = oracle.select_files(directory, args.limit)
    print(f"files: {len(files)} from {directory}; vocabulary {case.name} ({case.size} tokens)")
    for name in args.engines:
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed")
            continue
        engine = ENGINES[name](case)
        run(
            engine,
            files,
            case.tiktoken_encoding,
            case.eos,
            case.size,
            oracle,
            args.mask_tokens,
            not args.utf8,
        )


if __name__ == "__main__":
    main()
