"""The embedded GGUF model (SmolLM2-135M-Instruct, Q4_1) on the CPU, side by side in one run:
weight formats (dequantized bf16 vs 4-bit quantized), thread counts, and optionally the same
benchmark on another checkout of sglr (`--baseline-src`, e.g. the code before a change); with
several threads also the quantized model with decode steps capped to one thread
(`SGLR_CPU_DECODE_THREADS=1`).

Each system runs in its own process (so resident memory is its own) through the engine
(`generate_token_ids`: greedy, exactly N new tokens), and the systems take turns `--repeats`
times; each number is the best. Wall clock. Workloads: batch 1 (a 512-token prompt, 128 new
tokens: prefill tok/s, decode tok/s = 127 / (time(128) - time(1))) and 16 concurrent requests
(128-token prompts, 64 new tokens: output tok/s over the whole run). RSS: resident memory after
the run, and its peak.

    .venv/bin/python benches/cpu_gguf_compare.py [--threads 1 2] [--baseline-src /tmp/base/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "python")


def worker(spec: dict) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(spec["threads"])
    if spec.get("decode_threads"):
        os.environ["SGLR_CPU_DECODE_THREADS"] = str(spec["decode_threads"])
    from sglr.engine.offline import generate_token_ids as generate
    from sglr.model.runner import ModelRunner, RunnerConfig

    kwargs = {"gguf_weights": spec["gguf_weights"]} if spec["gguf_weights"] else {}
    runner = ModelRunner(
        RunnerConfig(None, device="cpu", dtype=spec["dtype"], kv_num_tokens=16384, max_num_reqs=32, **kwargs)
    )
    rng = np.random.default_rng(0)
    long_prompt = [rng.integers(3, runner.vocab_size, size=512).tolist()]
    batch = [rng.integers(3, runner.vocab_size, size=128).tolist() for _ in range(16)]
    generate(runner, [long_prompt[0][:32], batch[0][:32]], 2)  # warm-up

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    prefill = timed(lambda: generate(runner, long_prompt, 1))
    total = timed(lambda: generate(runner, long_prompt, 128))
    concurrent = timed(lambda: generate(runner, batch, 64))
    status = Path("/proc/self/status").read_text().split("\n")
    mem = {
        line.split(":")[0]: int(line.split()[1]) / 1024
        for line in status
        if line.startswith(("VmRSS", "VmHWM"))
    }
    return {
        "prefill": 512 / prefill,
        "decode": 127 / max(total - prefill, 1e-9),
        "concurrent": 16 * 64 / concurrent,
        "rss_mb": mem["VmRSS"],
        "peak_mb": mem["VmHWM"],
    }


def run_system(src: str, spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{spec}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spec(dtype: str, gguf_weights: str | None, threads: int) -> dict:
    return {"dtype": dtype, "gguf_weights": gguf_weights, "threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--baseline-src", default=None, help="another checkout's python/ dir (dequantized bf16)"
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    systems = []
    for threads in args.threads:
        if args.baseline_src:
            systems.append(
                (f"baseline bf16, {threads}T", args.baseline_src, _spec("bfloat16", None, threads))
            )
        systems.append((f"bf16 dequantized, {threads}T", SRC, _spec("bfloat16", "dequantized", threads)))
        systems.append((f"int4 quantized, {threads}T", SRC, _spec("bfloat16", "quantized", threads)))
        if threads > 1:
            label = f"int4 quantized, {threads}T, decode 1T"
            systems.append((label, SRC, dict(_spec("bfloat16", "quantized", threads), decode_threads=1)))
    best: dict[str, dict] = {}
    for _ in range(args.repeats):
        for label, src, spec in systems:
            result = run_system(src, spec)
            kept = best.setdefault(label, result)
            for key in ("prefill", "decode", "concurrent"):
                kept[key] = max(kept[key], result[key])
            for key in ("rss_mb", "peak_mb"):
                kept[key] = min(kept[key], result[key])
    base_label = systems[0][0]
    base = best[base_label]
    print(f"wall clock, best of {args.repeats}; ratios vs '{base_label}'")
    print(
        "| system | prefill tok/s (b1, 512) | decode tok/s (b1) | 16 concurrent out tok/s | RSS MB | peak RSS MB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, _, _ in systems:
        r = best[label]
        cells = [f"{r[k]:.0f} ({r[k] / base[k]:.2f}x)" for k in ("prefill", "decode", "concurrent")]
        print(f"| {label} | {' | '.join(cells)} | {r['rss_mb']:.0f} | {r['peak_mb']:.0f} |")


if __name__ == "__main__":
    main()
