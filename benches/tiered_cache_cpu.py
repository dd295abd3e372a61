"""The second KV tier on CPU (SmolLM2-135M, the embedded default model), tier on vs off.

(a) a working set several times the device pool: long-document QA (documents asked in turn,
    each question after its document) and multi-turn chats (each turn after the whole history),
    interleaved so that a request's prefix has left a small device pool by the time it returns.
    Requests run one after another (a user waiting on each), each on the tier-off and the
    tier-on engine in turn; TTFT is the time to the first streamed token. Hit rate: cached prompt tokens over prompt tokens, against the optimum of an
    unbounded cache (the longest prefix each prompt shares with any earlier one).
(b) restart: a 2k-token system prompt and a 4k-token document, each with a question, on an
    engine with `--hicache-storage-backend file`; the engine is shut down, a new one opened on
    the same directory asks again: TTFT with the stored pages vs cold (the first engine's).

Prompts are random token ids (the cost of a prefill does not depend on what it says).

    python benches/tiered_cache_cpu.py           # writes benches/results/tiered_cache_cpu.md
    python benches/tiered_cache_cpu.py --quick   # smaller workload, no file written
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

PARAMS = {"max_new_tokens": 8, "temperature": 0.0}
RESULTS = os.path.join(os.path.dirname(__file__), "results", "tiered_cache_cpu.md")


def workload(
    rng: np.random.Generator, num_docs: int, doc_len: int, num_chats: int, rounds: int
) -> list[list[int]]:
    """Interleaved requests: per round, each document's next question, then each chat's next turn."""

    def ids(n: int) -> list[int]:
        return rng.integers(100, 40000, n).tolist()

    docs = [ids(doc_len) for _ in range(num_docs)]
    chats = [ids(400) for _ in range(num_chats)]  # a system prompt and a first message each
    requests = []
    for _ in range(rounds):
        requests += [doc + ids(24) for doc in docs]
        for i, chat in enumerate(chats):
            requests.append(list(chat))
            chats[i] = chat + ids(8) + ids(40)  # the answer (stand-in) and the next user turn
    return requests


def optimal_hits(requests: list[list[int]]) -> int:
    """Tokens an unbounded prefix cache would serve (the last prompt token is always computed)."""
    total = 0
    for i, prompt in enumerate(requests):
        best = 0
        for earlier in requests[:i]:
            n = min(len(earlier), len(prompt) - 1)
            same = np.flatnonzero(np.asarray(earlier[:n]) != np.asarray(prompt[:n]))
            best = max(best, int(same[0]) if same.size else n)
        total += best
    return total


def timed(engine: Any, prompt: list[int]) -> tuple[float, int, int]:
    """(TTFT s, cached prompt tokens, prompt tokens) of one streamed request."""
    started = time.perf_counter()
    first = None
    last: dict[str, Any] = {}
    for chunk in engine.generate(input_ids=prompt, sampling_params=PARAMS, stream=True):
        if first is None:
            first = time.perf_counter() - started
        last = chunk
    meta = last["meta_info"]
    return first or 0.0, meta["cached_tokens"], meta["prompt_tokens"]


def run_a(
    requests: list[list[int]], pool_tokens: int, tiers: dict[str, dict[str, Any]]
) -> dict[str, dict[str, float]]:
    """Each request on every engine in turn (tier off, tier on), so that whatever else loads the
    machine meanwhile weighs on both alike; each engine's time is its own requests' sum."""
    from sglr.engine.engine import Engine

    engines = {
        name: Engine(device="cpu", max_total_tokens=pool_tokens, chunked_prefill_size=2048, **tier)
        for name, tier in tiers.items()
    }
    rows: dict[str, list[tuple[float, int, int, float]]] = {name: [] for name in engines}
    try:
        for prompt in requests:
            for name, engine in engines.items():
                started = time.perf_counter()
                ttft, cached, num_prompt = timed(engine, prompt)
                rows[name].append((ttft, cached, num_prompt, time.perf_counter() - started))
        stats = {name: engine.get_stats() for name, engine in engines.items()}
    finally:
        for engine in engines.values():
            engine.shutdown()
    results = {}
    for name, done in rows.items():
        ttft = np.array([row[0] for row in done]) * 1e3
        results[name] = {
            "cached": sum(row[1] for row in done),
            "prompt": sum(row[2] for row in done),
            "ttft_p50": float(np.percentile(ttft, 50)),
            "ttft_p99": float(np.percentile(ttft, 99)),
            "req_per_s": len(done) / sum(row[3] for row in done),
            "loaded": stats[name].get("hicache_loaded_tokens", 0),
            "load_s": stats[name].get("hicache_load_seconds", 0.0),
            "written_mb": stats[name].get("hicache_written_bytes", 0) / 2**20,
        }
    return results


def run_b(prompts: dict[str, list[int]], directory: str) -> dict[str, tuple[float, float, int]]:
    from sglr.engine.engine import Engine

    tier = {
        "enable_hierarchical_cache": True,
        "hicache_storage_backend": "file",
        "hicache_storage_dir": directory,
        "hicache_storage_prefetch_policy": "wait_complete",
        "hicache_size": 4.0,
    }
    cold: dict[str, float] = {}
    engine = Engine(device="cpu", max_total_tokens=8192, chunked_prefill_size=2048, **tier)
    try:
        for name, prompt in prompts.items():
            cold[name] = timed(engine, prompt)[0]
    finally:
        engine.shutdown()  # the pages stay in `directory`
    engine = Engine(device="cpu", max_total_tokens=8192, chunked_prefill_size=2048, **tier)
    try:
        stored = {name: timed(engine, prompt) for name, prompt in prompts.items()}
    finally:
        engine.shutdown()
    return {name: (cold[name], stored[name][0], stored[name][1]) for name in prompts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    pool = 1024
    rounds = 2 if args.quick else 4
    requests = workload(rng, num_docs=3, doc_len=960, num_chats=3, rounds=rounds)
    working_set = sum(len(r) for r in requests[: len(requests) // rounds])
    optimum = optimal_hits(requests)
    tier_on = {"enable_hierarchical_cache": True, "hicache_size": 4.0}
    results = run_a(requests, pool, {"off": {}, "on": tier_on})
    question = [5, 6, 7]
    long_prompts = {
        "2k system prompt": [*rng.integers(100, 40000, 2048).tolist(), *question],
        "4k document": [*rng.integers(100, 40000, 4096).tolist(), *question],
    }
    restart = run_b(long_prompts, tempfile.mkdtemp(prefix="sglr-bench-kv-"))

    lines = [
        "# Tiered KV cache on CPU (benches/tiered_cache_cpu.py)",
        "",
        f"SmolLM2-135M-Instruct (bf16), device pool {pool} tokens, one round's working set {working_set} "
        f"tokens ({working_set / pool:.1f}x the pool), {len(requests)} requests one after another, "
        f"{PARAMS['max_new_tokens']} output tokens each. Tier: pages of 64 tokens on local disk.",
        "",
        "## (a) long-document QA + multi-turn chat",
        "",
        "| tier | hit rate | of optimum | TTFT p50 ms | TTFT p99 ms | requests/s | loaded tokens | load s | written MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in results.items():
        rate = row["cached"] / row["prompt"]
        lines.append(
            f"| {name} | {rate:.1%} | {row['cached'] / optimum:.1%} | {row['ttft_p50']:.0f} | {row['ttft_p99']:.0f} "
            f"| {row['req_per_s']:.2f} | {row['loaded']} | {row['load_s']:.2f} | {row['written_mb']:.0f} |"
        )
    speedup = results["on"]["req_per_s"] / results["off"]["req_per_s"]
    lines += [
        "",
        f"Optimum (unbounded cache): {optimum} of {results['on']['prompt']} prompt tokens "
        f"({optimum / results['on']['prompt']:.1%}). Throughput tier on / off: {speedup:.2f}x.",
        "",
        "## (b) after a restart (file backend)",
        "",
        "| prompt | cold TTFT ms | stored TTFT ms | speedup | cached tokens |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, (cold, stored, cached) in restart.items():
        lines.append(f"| {name} | {cold * 1e3:.0f} | {stored * 1e3:.0f} | {cold / stored:.1f}x | {cached} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        with open(RESULTS, "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
