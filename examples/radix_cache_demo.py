"""Replays shared-prefix request traces through the radix prefix cache and prints hit rates.

Each request matches its longest cached prefix, locks it, allocates KV slots for the rest of
its prompt and its output (evicting least-recently-used prefixes when the pool is full), then
hands prompt + output back to the cache. The traces are synthetic and seeded; no model runs.

    python examples/radix_cache_demo.py [--capacity 24000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from sglr.engine.kv import KVPool, RequestKV

VOCAB_SIZE = 32_000


@dataclass
class Request:
    prompt_ids: np.ndarray
    output_ids: np.ndarray


def tokens(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(1, VOCAB_SIZE, size=n, dtype=np.int32)


def few_shot_trace(rng: np.random.Generator) -> list[Request]:
    """8 subjects x 32 questions; each subject shares a ~1.5k-token 5-shot prefix."""
    prefixes = [tokens(rng, int(rng.integers(1400, 1600))) for _ in range(8)]
    trace = [
        Request(np.concatenate([prefix, tokens(rng, int(rng.integers(40, 80)))]), tokens(rng, 1))
        for prefix in prefixes
        for _ in range(32)
    ]
    rng.shuffle(trace)
    return trace


def multi_turn_chat_trace(rng: np.random.Generator) -> list[Request]:
    """48 sessions x 4 turns behind one system prompt; turns of different sessions interleave."""
    system = tokens(rng, 200)
    histories = [system.copy() for _ in range(48)]
    trace = []
    for _turn in range(4):
        order = rng.permutation(len(histories))
        for session in order:
            prompt = np.concatenate([histories[session], tokens(rng, int(rng.integers(64, 160)))])
            output = tokens(rng, int(rng.integers(32, 96)))
            trace.append(Request(prompt, output))
            histories[session] = np.concatenate([prompt, output])
    return trace


def self_consistency_trace(rng: np.random.Generator) -> list[Request]:
    """32 questions with ~600-token contexts, 5 sampled answers each (a fork of 5)."""
    trace = []
    for _ in range(32):
        prompt = tokens(rng, int(rng.integers(500, 700)))
        trace.extend(Request(prompt, tokens(rng, int(rng.integers(40, 120)))) for _ in range(5))
    return trace


@dataclass
class ReplayStats:
    num_requests: int
    num_prompt_tokens: int
    num_cached_tokens: int
    num_evicted_tokens: int
    seconds: float

    @property
    def hit_rate(self) -> float:
        return self.num_cached_tokens / max(self.num_prompt_tokens, 1)


def replay(trace: list[Request], capacity: int) -> ReplayStats:
    pool = KVPool(capacity, max_num_reqs=1)
    num_prompt = num_cached = num_evicted = 0
    start = time.perf_counter()
    for request in trace:
        kv = RequestKV()
        matched, node = pool.tree.match_prefix(request.prompt_ids)
        if node is not None:
            pool.tree.lock(node)  # what the scheduler does for an admitted request
        pool.admit(kv, matched, node)
        num_new = request.prompt_ids.size - matched.size + request.output_ids.size
        evictable_before = pool.index.evictable_size()
        if not pool.reserve([kv], [num_new]):
            raise RuntimeError(f"a request of {num_new} new tokens does not fit a pool of {capacity}")
        num_evicted += evictable_before - pool.index.evictable_size()
        pool.commit(kv)
        pool.release(kv, np.concatenate([request.prompt_ids, request.output_ids]), None, keep=True)
        num_prompt += request.prompt_ids.size
        num_cached += matched.size
    seconds = time.perf_counter() - start
    pool.check_invariants()
    return ReplayStats(len(trace), num_prompt, num_cached, num_evicted, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=24_000, help="KV pool size in tokens")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    traces = {
        "few-shot (8 subjects x 32 q)": few_shot_trace,
        "multi-turn chat (48 x 4 turns)": multi_turn_chat_trace,
        "self-consistency (32 q x 5)": self_consistency_trace,
    }
    print(f"Radix prefix cache replay: KV pool of {args.capacity:,} tokens vs an unbounded pool\n")
    header = f"{'trace':<32} {'requests':>8} {'prompt tok':>10} {'hit rate':>9} {'unbounded':>9} {'evicted':>8} {'us/req':>7}"
    print(header)
    print("-" * len(header))
    for name, make_trace in traces.items():
        trace = make_trace(np.random.default_rng(args.seed))
        bounded = replay(trace, args.capacity)
        unbounded = replay(trace, sum(r.prompt_ids.size + r.output_ids.size for r in trace))
        print(
            f"{name:<32} {bounded.num_requests:>8} {bounded.num_prompt_tokens:>10,} "
            f"{bounded.hit_rate:>8.1%} {unbounded.hit_rate:>9.1%} {bounded.num_evicted_tokens:>8,} "
            f"{1e6 * bounded.seconds / bounded.num_requests:>7.1f}"
        )
    print(
        "\nhit rate = cached prompt tokens / prompt tokens; us/req = match + lock + alloc + insert + unlock"
    )


if __name__ == "__main__":
    main()
