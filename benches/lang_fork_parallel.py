"""Interpreter parallelism: a program that forks N branches on the in-process engine, N = 1 and 8.

The branches share a cached prefix (the fork hint) and decode in the same batches, so 8
branches should cost little more than one. Prints latency, forward passes and the mean decode
batch size side by side, and the 8/1 latency ratio (sequential branches would give about 8).

    .venv/bin/python benches/lang_fork_parallel.py [--model-path PATH | --tiny] [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import sglr as sgl


@sgl.function
def fan_out(s, num_branches, num_tokens):
    s += sgl.system("You are a helpful assistant.")
    s += sgl.user("Give me one idea for a short story about the sea.")
    forks = s.fork(num_branches)
    forks += lambda i: sgl.assistant(
        f"Idea {i + 1}:" + sgl.gen("idea", max_tokens=num_tokens, ignore_eos=True)
    )
    forks.join()


def measure(engine, num_branches: int, num_tokens: int) -> dict[str, float]:
    sgl.flush_cache(engine)
    before = engine.get_stats()
    started = time.perf_counter()
    state = fan_out.run(num_branches=num_branches, num_tokens=num_tokens, backend=engine, temperature=0)
    assert len(state["idea"]) == num_branches
    seconds = time.perf_counter() - started
    after = engine.get_stats()
    passes = after["num_decode_passes"] - before["num_decode_passes"]
    return {
        "seconds": seconds,
        "extend_passes": after["num_extend_passes"] - before["num_extend_passes"],
        "decode_passes": passes,
        "mean_batch": (after["num_decode_seqs"] - before["num_decode_seqs"]) / max(passes, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    parser.add_argument("--tiny", action="store_true", help="the seeded tiny random model instead")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model_path = args.model_path
    if args.tiny:
        from sglr.testing.tiny import tiny_model_path

        model_path = str(tiny_model_path("llama"))
    engine = sgl.Engine(model_path=model_path, device=args.device)
    try:
        measure(engine, 2, 4)  # warm up
        rows = {}
        for num_branches in (1, 8):
            runs = [measure(engine, num_branches, args.tokens) for _ in range(args.repeats)]
            rows[num_branches] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    finally:
        engine.shutdown()
    print(f"model: {engine.model_path}, {args.tokens} tokens per branch, median of {args.repeats} runs")
    print(f"{'branches':>8} {'latency s':>10} {'extend passes':>14} {'decode passes':>14} {'mean batch':>11}")
    for num_branches, row in rows.items():
        print(
            f"{num_branches:>8} {row['seconds']:>10.3f} {row['extend_passes']:>14.0f} "
            f"{row['decode_passes']:>14.0f} {row['mean_batch']:>11.2f}"
        )
    print(f"latency 8 branches / 1 branch: {rows[8]['seconds'] / rows[1]['seconds']:.2f}x")


if __name__ == "__main__":
    main()
