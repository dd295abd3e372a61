"""Many LoRA adapters on one base model, on the CPU: one engine serving 32 concurrent requests
spread over 8 adapters, against the same requests all on the base model, and against the
adapters served one at a time (each adapter's requests as a batch of their own, one batch after
another, as one process per adapter would on a shared machine).

SmolLM2-135M-Instruct (the embedded 4-bit GGUF) with 8 random adapters written in PEFT's layout
(`sglr.testing.tiny_lora.write_random_adapter`), ranks 8 and 16 alternating, on all seven
projections (q, k, v, o, gate, up, down). Greedy, `ignore_eos`, `--max-new-tokens` each. Every
request streams (one thread each) so TTFT (submit to first token) and ITL (mean gap between later
tokens) are measured per request; throughput is all output tokens over the wall time of the
whole run. The modes alternate round by round (`--rounds`), each round's prompts already in the
prefix cache of every adapter (a priming pass), so the timings are of decoding.

    python benches/lora_cpu.py                 # the full run (a few minutes)
    python benches/lora_cpu.py --quick         # fewer requests and tokens
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))

ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TOPICS = ("weather", "gardening", "chess", "bread", "rivers", "bicycles", "tea", "maps")


@dataclass
class Timing:
    """One request's clock: submit, each token's arrival."""

    submitted: float
    token_times: list[float] = field(default_factory=list)

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.submitted

    @property
    def itl(self) -> float | None:
        gaps = [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]
        return statistics.fmean(gaps) if gaps else None


@dataclass
class ModeRun:
    seconds: float
    timings: list[Timing]

    @property
    def num_tokens(self) -> int:
        return sum(len(t.token_times) for t in self.timings)

    @property
    def tokens_per_s(self) -> float:
        return self.num_tokens / self.seconds


def prompts_for(num_requests: int) -> list[str]:
    return [
        f"Write a short note, number {i}, about {TOPICS[i % len(TOPICS)]} for a friend who asked."
        for i in range(num_requests)
    ]


def stream_requests(
    engine, prompts: list[str], loras: list[str | None], params: dict, submitted_at: float | None = None
) -> ModeRun:
    """All requests at once, one streaming thread each; `submitted_at`: when they count as
    submitted (default: when their thread sends them)."""
    timings: list[Timing | None] = [None] * len(prompts)
    start_gate = threading.Barrier(len(prompts) + 1)

    def run(index: int) -> None:
        start_gate.wait()
        timing = Timing(time.perf_counter() if submitted_at is None else submitted_at)
        for chunk in engine.generate(prompts[index], params, lora_path=loras[index], stream=True):
            now = time.perf_counter()
            timing.token_times.extend(now for _ in chunk["output_ids"])
        timings[index] = timing

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    start_gate.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    assert all(t is not None for t in timings)
    return ModeRun(seconds, timings)  # type: ignore[arg-type]


def one_adapter_at_a_time(engine, prompts: list[str], loras: list[str | None], params: dict) -> ModeRun:
    """Each adapter's requests as a batch of their own, the batches one after another; every
    request counts as submitted at the start (a later batch's requests wait for the earlier)."""
    start = time.perf_counter()
    timings: list[Timing] = []
    for name in dict.fromkeys(loras):
        indices = [i for i, lora in enumerate(loras) if lora == name]
        part = stream_requests(engine, [prompts[i] for i in indices], [name] * len(indices), params, start)
        timings.extend(part.timings)
    return ModeRun(time.perf_counter() - start, timings)


def summarize(runs: list[ModeRun]) -> dict[str, float]:
    """Medians over rounds of throughput, and medians over all requests of TTFT and ITL."""
    ttfts = [t.ttft for run in runs for t in run.timings]
    itls = [t.itl for run in runs for t in run.timings if t.itl is not None]
    return {
        "tokens_per_s": statistics.median(run.tokens_per_s for run in runs),
        "ttft_ms": 1000 * statistics.median(ttfts),
        "ttft_p90_ms": 1000 * statistics.quantiles(ttfts, n=10)[-1],
        "itl_ms": 1000 * statistics.median(itls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-adapters", type=int, default=8)
    parser.add_argument("--num-requests", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="8 requests over 4 adapters, 16 tokens, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.num_adapters, args.num_requests, args.max_new_tokens, args.rounds = 4, 8, 16, 1

    from sglr.engine.engine import Engine
    from sglr.testing.tiny_lora import write_random_adapter

    engine = Engine(None, device="cpu", enable_lora=True, max_loras_per_batch=args.num_adapters)
    adapter_dir = Path(tempfile.mkdtemp(prefix="sglr-lora-bench-"))
    names = [f"adapter{i}" for i in range(args.num_adapters)]
    ranks = [8 if i % 2 == 0 else 16 for i in range(args.num_adapters)]
    for i, (name, rank) in enumerate(zip(names, ranks, strict=True)):
        path = write_random_adapter(
            engine.runner.config,
            adapter_dir / name,
            rank=rank,
            target_modules=ALL_PROJECTIONS,
            seed=i,
            scale=0.2,
        )
        engine.load_lora_adapter(name, str(path))
    prompts = prompts_for(args.num_requests)
    spread = [names[i % len(names)] for i in range(args.num_requests)]
    params = {"max_new_tokens": args.max_new_tokens, "temperature": 0, "ignore_eos": True}
    modes = {
        "base model": lambda: stream_requests(engine, prompts, [None] * len(prompts), params),
        "mixed adapters": lambda: stream_requests(engine, prompts, spread, params),
        "one adapter at a time": lambda: one_adapter_at_a_time(engine, prompts, spread, params),
    }
    prime = {**params, "max_new_tokens": 1}
    engine.generate(prompts, prime)
    engine.generate(prompts, prime, lora_path=spread)
    runs: dict[str, list[ModeRun]] = {mode: [] for mode in modes}
    started = time.perf_counter()
    for round_index in range(args.rounds):
        for mode, run in modes.items():
            runs[mode].append(run())
            print(
                f"[round {round_index + 1}/{args.rounds}] {mode}: {runs[mode][-1].tokens_per_s:.1f} tok/s",
                file=sys.stderr,
                flush=True,
            )
    engine.shutdown()
    summary = {mode: summarize(mode_runs) for mode, mode_runs in runs.items()}
    base = summary["base model"]["tokens_per_s"]
    mixed = summary["mixed adapters"]["tokens_per_s"]
    one_at_a_time = summary["one adapter at a time"]["tokens_per_s"]
    print(
        f"\n{args.num_requests} requests x {args.max_new_tokens} tokens, {args.num_adapters} adapters "
        f"(ranks {sorted(set(ranks))}, all seven projections), {args.rounds} rounds, "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    print("| mode | tokens/s | vs base | TTFT median ms | TTFT p90 ms | ITL median ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, row in summary.items():
        print(
            f"| {mode} | {row['tokens_per_s']:.1f} | {row['tokens_per_s'] / base:.2f}x | {row['ttft_ms']:.0f} "
            f"| {row['ttft_p90_ms']:.0f} | {row['itl_ms']:.1f} |"
        )
    print(f"\nmixed / base: {mixed / base:.2f}x (target >= 0.70x)")
    print(f"mixed / one adapter at a time: {mixed / one_at_a_time:.2f}x (target >= 3.00x)")


if __name__ == "__main__":
    main()
