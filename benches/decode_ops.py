"""Where a batch-1 decode step's time goes on the CPU: torch operations per step (the profiler's
count of aten calls) and milliseconds per step, driving the model runner directly (no engine).

One prompt of `--prompt-len` tokens is prefilled, then `--steps` decode steps are timed and one
more is profiled. The table lists the most frequent operations of that step. `--compare-attention`
times the CPU decode attention kernel (rust/kernels' attn) against the SDPA path, alternating three rounds
of each in one run (the fastest round counts).

    .venv/bin/python benches/decode_ops.py [--model default] [--dtype bfloat16] [--gguf-weights quantized]
    .venv/bin/python benches/decode_ops.py --gguf-weights quantized --compare-attention
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
import torch

from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig


def decode_step(runner: ModelRunner, token: int, seq_len: int) -> int:
    """One decode step of request row 1 whose cache holds slots 1..seq_len-1; greedy next token."""
    out = runner.forward_decode([1], [token], [seq_len], [seq_len])
    return int(out.next_token_logits[0].argmax())


def count_ops(runner: ModelRunner, token: int, seq_len: int) -> tuple[int, Counter[str]]:
    """aten operations one decode step runs (top-level ones: an op's own sub-calls not counted)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decode_step(runner, token, seq_len)
    events = [e for e in prof.events() if e.name.startswith(("aten::", "mkldnn::"))]
    # An event is top-level when no other aten event encloses it.
    events.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    top: list = []
    end = -1.0
    for event in events:
        if event.time_range.start >= end:
            top.append(event)
            end = event.time_range.end
    return len(top), Counter(e.name for e in top)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="default", help="'default' (SmolLM2-135M-Instruct) or a path")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--gguf-weights", default="auto", choices=["auto", "quantized", "dequantized"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--compare-attention", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = None if args.model == "default" else args.model
    config = RunnerConfig(
        path, device="cpu", dtype=args.dtype, gguf_weights=args.gguf_weights, kv_num_tokens=4096
    )
    runner = ModelRunner(config)
    rng = np.random.default_rng(0)
    prompt = rng.integers(3, runner.vocab_size, size=args.prompt_len)
    slots = np.arange(1, args.prompt_len + 1)
    empty = np.zeros(0, dtype=np.int64)
    out = runner.forward_extend([ExtendRequest(1, prompt, empty, slots)])
    token, seq_len = int(out.next_token_logits[0].argmax()), args.prompt_len + 1
    for _ in range(4):  # warm-up
        token, seq_len = decode_step(runner, token, seq_len), seq_len + 1
    clock = time.process_time if args.threads == 1 else time.perf_counter

    def timed_steps() -> float:
        nonlocal token, seq_len
        start = clock()
        for _ in range(args.steps):
            token, seq_len = decode_step(runner, token, seq_len), seq_len + 1
        return (clock() - start) / args.steps * 1e3

    if args.compare_attention:
        best = {True: float("inf"), False: float("inf")}
        for _ in range(3):
            for kernel in (True, False):
                runner.attn.use_cpu_decode_kernel = kernel
                best[kernel] = min(best[kernel], timed_steps())
        ops = {}
        for kernel in (True, False):
            runner.attn.use_cpu_decode_kernel = kernel
            ops[kernel] = count_ops(runner, token, seq_len)[0]
        print(f"{args.model}: dtype {args.dtype}, weights {runner.weights_format}, {args.threads} thread(s)")
        print("| decode attention | ms/step | tok/s | aten ops/step |\n| --- | ---: | ---: | ---: |")
        for kernel, name in ((False, "SDPA path"), (True, "rust attention kernel")):
            print(f"| {name} | {best[kernel]:.2f} | {1e3 / best[kernel]:.1f} | {ops[kernel]} |")
        print(f"kernel / SDPA step time: {best[True] / best[False]:.2f}")
        return
    step_ms = timed_steps()
    num_ops, by_name = count_ops(runner, token, seq_len)
    print(
        f"{args.model}: dtype {args.dtype}, weights {runner.weights_format}, {args.threads} thread(s); "
        f"decode at {args.prompt_len}+ tokens: {step_ms:.2f} ms/step ({1e3 / step_ms:.1f} tok/s), "
        f"{num_ops} aten ops/step"
    )
    print("| op | calls per step |\n| --- | ---: |")
    for name, count in by_name.most_common(args.top):
        print(f"| {name} | {count} |")


if __name__ == "__main__":
    main()
