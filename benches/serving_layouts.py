"""The process layouts side by side, in one run: the old single-process server, the server with
its scheduler in a worker process, tensor parallelism over 2 ranks, and the engine in process.

For each layout the same streaming workload runs (warm-up first) and the table shows throughput,
TTFT / ITL, the server front's CPU per streamed token (single process: its HTTP thread only,
the rest being the engine; workers: the whole front process, HTTP + output dispatch +
detokenization) and the scheduler's time per forward pass. The last layout runs the requests in
process on a worker-process engine, non-streaming, so its time per forward pass is the
scheduler's without any streaming client: the ratio next to it is the cost of the clients. The
load generator (this process) runs on the same machine: its CPU per streamed token is printed next
to the front's, since on a box with few cores both take time from the scheduler's threads.

    python benches/serving_layouts.py --model tiny --num-prompts 400
    python benches/serving_layouts.py --model smollm2 --num-prompts 64 --random-output-len 32

With as many prompts as the concurrency (`--num-prompts 256 --max-concurrency 256`) every request
arrives at once in both runs, so their batches match (the pass counts are printed next to the
busy-time ratio): the ratio is then the clients' cost to the scheduler's step time.

`--pin-worker` gives the worker process the last CPU and the front, the load generator and
everything else the others (both worker-layout runs): on a box with few cores the clients
otherwise take the worker's core, and the ratio would measure the box, not the scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

import httpx

from benchlib.serving_datasets import random_dataset
from serving_load import (
    _cpu_seconds,
    _engine_counters,
    _launch,
    run_http,
    run_in_process,
    summarize,
)


def _children(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if parent == pid:
                children.append(int(entry))
    return children


def _set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` (threads started later inherit their starter's CPUs)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):  # a thread that has exited
            os.sched_setaffinity(int(tid), cpus)


def pin_worker(worker_parent: int, others: list[int]) -> set[int]:
    """Worker processes below `worker_parent` on the last CPU, `others` and this process on the
    rest; returns this process's CPUs before, to restore."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin-worker needs at least two CPUs")
    before = set(cpus)
    workers = [
        pid
        for pid in _children(worker_parent)
        if b"sglr.engine.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    if not workers:
        raise SystemExit("--pin-worker: no worker process found")
    for pid in workers:
        _set_affinity(pid, {cpus[-1]})
    for pid in {*others, os.getpid()}:
        _set_affinity(pid, set(cpus[:-1]))
    return before


def serve(args: argparse.Namespace, flags: str, requests: list, warm: list, pin: bool = False) -> dict:
    process, base_url = _launch(flags)
    restore = pin_worker(process.pid, [process.pid]) if pin else None
    try:
        no_limits = argparse.Namespace(
            **{**vars(args), "max_concurrency": None, "request_rate": float("inf")}
        )
        asyncio.run(run_http(no_limits, base_url, warm))
        with httpx.Client(base_url=base_url, timeout=60) as client:
            before, cpu_before = _engine_counters(client), _cpu_seconds(process.pid)
            load_cpu_before = time.process_time()
            outcomes, duration = asyncio.run(run_http(args, base_url, requests))
            load_cpu = time.process_time() - load_cpu_before
            after, cpu_after = _engine_counters(client), _cpu_seconds(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
        if restore is not None:
            _set_affinity(os.getpid(), restore)
    row = summarize(outcomes, duration)
    tokens = max(after["num_generated_tokens"] - before["num_generated_tokens"], 1)
    passes = max(after["num_forward_passes"] - before["num_forward_passes"], 1)
    row["busy_s"] = after["busy_seconds"] - before["busy_seconds"]
    row["num_passes"] = passes
    row["ms_per_pass"] = row["busy_s"] / passes * 1e3
    main_thread = cpu_after[0] - cpu_before[0]
    whole = cpu_after[1] - cpu_before[1]
    row["front_cpu_ms_per_token"] = (main_thread if "--single-process" in flags else whole) / tokens * 1e3
    row["load_cpu_ms_per_token"] = load_cpu / tokens * 1e3
    return row


def in_process_streaming(args: argparse.Namespace, flags: str, requests: list, warm: list) -> dict:
    load_args = argparse.Namespace(**{**vars(args), "launch": flags})
    outcomes, duration = run_in_process(load_args, requests, warm)
    return summarize(outcomes, duration)


def workers_without_clients(
    args: argparse.Namespace, model_path: str, requests: list, pin: bool = False
) -> dict:
    """The same requests, all at once, non-streaming, on a worker-process engine."""
    from sglr.engine.engine import Engine

    engine = Engine(model_path=model_path, device="cpu", multiprocess=True)
    restore = pin_worker(os.getpid(), []) if pin else None
    try:
        params = [{"max_new_tokens": r.output_len, "ignore_eos": True, "temperature": 0} for r in requests]
        engine.generate(input_ids=[r.prompt_ids for r in requests[:4]], sampling_params=params[:4])
        before = engine.get_stats()
        start = time.perf_counter()
        results = engine.generate(input_ids=[r.prompt_ids for r in requests], sampling_params=params)
        duration = time.perf_counter() - start
        after = engine.get_stats()
    finally:
        engine.shutdown()
        if restore is not None:
            _set_affinity(os.getpid(), restore)
    passes = max(after["num_forward_passes"] - before["num_forward_passes"], 1)
    output_tokens = sum(r["meta_info"]["completion_tokens"] for r in results)
    return {
        "request_throughput": len(results) / duration,
        "output_throughput": output_tokens / duration,
        "busy_s": after["busy_seconds"] - before["busy_seconds"],
        "num_passes": passes,
        "ms_per_pass": (after["busy_seconds"] - before["busy_seconds"]) / passes * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--model",
        default="tiny",
        help="tiny (the seeded test model), smollm2 (the embedded default), or a path",
    )
    add("--num-prompts", type=int, default=400)
    add("--random-input-len", type=int, default=256)
    add("--random-output-len", type=int, default=64)
    add("--max-concurrency", type=int, default=256)
    add("--skip-tp", action="store_true", help="leave out the tp=2 layout")
    add("--pin-worker", action="store_true", help="the worker process alone on the last CPU")
    args = parser.parse_args()
    from sglr.model.default_model import resolve_model_path
    from sglr.testing.tiny import tiny_model_path

    model_path = str(
        tiny_model_path("llama")
        if args.model == "tiny"
        else resolve_model_path(None if args.model == "smollm2" else args.model)
    )
    load = argparse.Namespace(
        api="native", api_key=None, request_rate=float("inf"), max_concurrency=args.max_concurrency, seed=1
    )
    vocab = 4096 if args.model == "tiny" else 49152
    requests = random_dataset(
        args.num_prompts, args.random_input_len, args.random_output_len, 0.5, vocab, seed=1
    )
    warm = random_dataset(8, 16, 4, 1.0, vocab, seed=2)
    base = f"--model-path {model_path} --device cpu"
    layouts = [
        ("one process over HTTP (old)", lambda: serve(load, f"{base} --single-process", requests, warm)),
        ("worker process over HTTP", lambda: serve(load, base, requests, warm, args.pin_worker)),
        (
            "in process (no HTTP)",
            lambda: in_process_streaming(load, f"{base} --single-process", requests, warm),
        ),
    ]
    if not args.skip_tp:
        layouts.insert(
            2, ("tp=2 workers over HTTP", lambda: serve(load, f"{base} --tp-size 2", requests, warm))
        )
    rows = []
    for name, run in layouts:
        print(f"running: {name}", flush=True)
        rows.append((name, run()))
    print("running: worker process, in process, no streaming client", flush=True)
    quiet = workers_without_clients(load, model_path, requests, args.pin_worker)
    reference = rows[-1][1]["request_throughput"]
    print(
        f"\n# {args.num_prompts} streaming requests (max concurrency {args.max_concurrency}), "
        f"input ~{args.random_input_len}, output {args.random_output_len} tokens; model {model_path}; "
        f"{os.cpu_count()} CPU cores"
    )
    print(
        "| layout | req/s | vs in process | out tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | front CPU ms/token | ms per forward pass |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows:
        cpu = row.get("front_cpu_ms_per_token")
        pass_ms = row.get("ms_per_pass")
        print(
            f"| {name} | {row['request_throughput']:.2f} | {row['request_throughput'] / reference:.2f} "
            f"| {row['output_throughput']:.0f} | {row['ttft_ms']['p50']:.1f} / {row['ttft_ms']['p99']:.1f} "
            f"| {row['itl_ms']['p50']:.2f} / {row['itl_ms']['p99']:.2f} "
            f"| {'n/a' if cpu is None else f'{cpu:.3f}'} | {'n/a' if pass_ms is None else f'{pass_ms:.2f}'} |"
        )
    worker_pass = rows[1][1]["ms_per_pass"]
    print(
        f"| worker process, no streaming client | {quiet['request_throughput']:.2f} | "
        f"{quiet['request_throughput'] / reference:.2f} | {quiet['output_throughput']:.0f} | n/a | n/a | n/a "
        f"| {quiet['ms_per_pass']:.2f} |"
    )
    print(
        f"\nscheduler time per forward pass with {args.max_concurrency} streaming clients / without: "
        f"{worker_pass / quiet['ms_per_pass']:.3f} "
        + (
            "(one wave: every request arrives at once in both runs)"
            if args.num_prompts <= args.max_concurrency
            else "(batches differ: the clients arrive over time)"
        )
    )
    print(
        f"CPU per streamed token of the load generator (this process, the clients) / of the "
        f"worker layout's front: {rows[1][1]['load_cpu_ms_per_token']:.3f} / "
        f"{rows[1][1]['front_cpu_ms_per_token']:.3f} ms (on a box with few cores both take CPU "
        f"the scheduler's threads would use)"
    )
    print(
        f"scheduler busy time for the whole workload with the clients / without: "
        f"{rows[1][1]['busy_s']:.2f} s / {quiet['busy_s']:.2f} s = {rows[1][1]['busy_s'] / quiet['busy_s']:.3f} "
        f"over {rows[1][1]['num_passes']} / {quiet['num_passes']} forward passes"
    )


if __name__ == "__main__":
    main()
