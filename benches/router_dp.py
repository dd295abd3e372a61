"""Data-parallel routing, side by side in one run: `sglr-router` in front of two `sglr-server`
workers (tiny model, CPU) under the shared-prefix workload with many prefix groups.

For each policy (cache-aware, round-robin, shortest-queue) a fresh router over the same two
workers (their caches flushed first), and as the reference one worker alone behind the router
(dp=1, the same KV size per worker). Reported per run: aggregate prefix-cache hit rate (cached
prompt tokens / prompt tokens, from every response's `meta_info`), its ratio to dp=1, request
throughput, TTFT p50 / p99, failures. Then the router's own cost per request: choosing a worker
(body parse + routing key + policy + finish, in process, on this workload's bodies), the extra
latency of the HTTP hop (a 1-token request through the router vs straight to a worker, median;
also against a stand-in worker that answers at once, which leaves the router's own cost without
the model worker's processes beside it on the CPUs, with the router process's CPU time per
request), and the prefix forest's insert / lookup rate on radix_overhead.py's heavy trace next to the
KV cache's RadixTree.

    python benches/router_dp.py                      # about two minutes on a 2-core CPU
    python benches/router_dp.py --num-groups 64 --output benches/results/router_dp_cpu.md
    python benches/router_dp.py --device cuda --body llama3-8b --system-len 1024 --max-total-tokens 65536

`--body llama3-8b` gives each worker Llama-3-8B's layer shapes (bf16, random weights) over the
tiny model's tokenizer and vocabulary: on a GPU, prefill then costs what a real 8B model's does, so
the policies' throughput and TTFT differ for the reason they would in production (both workers
share one card in that run).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

import httpx

from benchlib.process_cpu import cpu_seconds
from benchlib.serving_datasets import BenchRequest, shared_prefix_dataset

_ADDRESS = re.compile(r"(?:sglr-server|sglr-router|instant-worker): \w+ .* on (http://\S+)")


@dataclass
class Outcome:
    ok: bool
    ttft_s: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0


def router_module(tree: str | None = None) -> str:
    """What `python -m` starts `sglr-router` as in `tree` (a python/ source tree; None: the one
    this process imports). Trees from before the router was its own package keep it in the
    server, so benchmarks can still compare against them."""
    if tree is not None:
        new_layout = (Path(tree) / "sglr" / "router" / "launch.py").exists()
    else:
        new_layout = importlib.util.find_spec("sglr.router.launch") is not None
    return "sglr.router" if new_layout else "sglr.server.router_launch"


def spawn(argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    for line in process.stdout:
        match = _ADDRESS.search(line)
        if match:
            return process, match.group(1)
    raise SystemExit(f"{argv[:3]} exited with status {process.wait()}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def one(client: httpx.AsyncClient, request: BenchRequest) -> Outcome:
    body = {
        "input_ids": request.prompt_ids,
        "stream": True,
        "sampling_params": {"max_new_tokens": request.output_len, "ignore_eos": True, "temperature": 0},
    }
    started = time.perf_counter()
    outcome = Outcome(ok=False)
    async with client.stream("POST", "/generate", json=body) as response:
        if response.status_code != 200:
            return outcome
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                return outcome
            if not outcome.ttft_s:
                outcome.ttft_s = time.perf_counter() - started
            meta = event["meta_info"]
            outcome.prompt_tokens = meta["prompt_tokens"]
            outcome.cached_tokens = meta["cached_tokens"]
    outcome.ok = True
    return outcome


async def run_workload(
    url: str, requests: list[BenchRequest], concurrency: int
) -> tuple[list[Outcome], float]:
    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def limited(request: BenchRequest) -> Outcome:
            async with semaphore:
                return await one(client, request)

        started = time.perf_counter()
        outcomes = await asyncio.gather(*(limited(request) for request in requests))
    return list(outcomes), time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def run_policy(policy: str, worker_urls: list[str], requests: list[BenchRequest], concurrency: int) -> dict:
    for url in worker_urls:
        httpx.post(url + "/flush_cache", timeout=60).raise_for_status()
    router_argv = ["-m", router_module(), "--port", "0", "--log-level", "warning"]
    router, router_url = spawn([*router_argv, "--policy", policy, "--worker-urls", *worker_urls])
    try:
        outcomes, duration = asyncio.run(run_workload(router_url, requests, concurrency))
        per_worker = {
            w["url"]: w["num_routed"] for w in httpx.get(router_url + "/list_workers").json()["workers"]
        }
    finally:
        stop(router)
    done = [o for o in outcomes if o.ok]
    ttfts = [o.ttft_s * 1e3 for o in done]
    return {
        "hit_rate": sum(o.cached_tokens for o in done) / max(1, sum(o.prompt_tokens for o in done)),
        "throughput": len(done) / duration,
        "ttft_p50": percentile(ttfts, 50),
        "ttft_p99": percentile(ttfts, 99),
        "failed": len(outcomes) - len(done),
        "split": "/".join(str(per_worker.get(url, 0)) for url in worker_urls),
    }


def routing_decision_us(requests: list[BenchRequest], num_workers: int = 2) -> float:
    """In-process cost of what the router does per request besides the HTTP hop: parse the body,
    take its routing key, choose a worker (cache-aware), finish."""
    from sglr.router.keys import routing_key
    from sglr.router.workers import WorkerPool

    pool = WorkerPool([f"http://127.0.0.1:{10000 + i}" for i in range(num_workers)])
    bodies = [
        json.dumps(
            {"input_ids": r.prompt_ids, "stream": True, "sampling_params": {"max_new_tokens": 8}}
        ).encode()
        for r in requests
    ]
    rounds = max(1, 4000 // len(bodies))
    started = time.perf_counter()
    for _ in range(rounds):
        for body in bodies:
            route = pool.route(routing_key("/generate", json.loads(body)))
            pool.finish(route)
    return (time.perf_counter() - started) / (rounds * len(bodies)) * 1e6


def hop_overhead_ms(
    router_url: str, worker_url: str, num: int = 150, router: subprocess.Popen | None = None
) -> tuple[float, float, float]:
    """Median latency of a 1-token request straight to the worker and through the router, and
    the router process's CPU time per routed request (NaN without `router`)."""
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1}}
    cpu_s = [0.0]

    def median_ms(url: str) -> float:
        with httpx.Client(base_url=url, timeout=60) as client:
            client.post("/generate", json=body)  # warm the connection
            samples = []
            before = cpu_seconds(router.pid) if router is not None and url == router_url else None
            for _ in range(num):
                started = time.perf_counter()
                client.post("/generate", json=body).raise_for_status()
                samples.append((time.perf_counter() - started) * 1e3)
            if before is not None and router is not None:
                cpu_s[0] += cpu_seconds(router.pid) - before
        return statistics.median(samples)

    # Interleaved halves, so drift on a shared machine hits both sides alike.
    direct = [median_ms(worker_url), 0.0]
    routed = [median_ms(router_url), 0.0]
    direct[1], routed[1] = median_ms(worker_url), median_ms(router_url)
    cpu_us = cpu_s[0] / (2 * num) * 1e6 if router is not None else float("nan")
    return statistics.fmean(direct), statistics.fmean(routed), cpu_us


def tree_rates() -> dict[str, tuple[float, float]]:
    """Inserts and prefix lookups per second on radix_overhead.py's heavy trace (2,000 requests
    of 1-4k tokens over 32 shared prefixes): the router's forest (two replicas, alternating)
    next to the KV cache's RadixTree (one tree, slots = positions)."""
    import numpy as np

    from radix_overhead import grouped_trace
    from sglr._core import PrefixForest, RadixTree

    trace = grouped_trace(2, 32, 63, (512, 2048), (256, 2048))[:2000]
    forest = PrefixForest(1 << 24)
    forest.add_replica(0)
    forest.add_replica(1)
    tree = RadixTree()
    rates = {}
    started = time.perf_counter()
    for index, key in enumerate(trace):
        forest.insert(index % 2, key)
    insert_s = time.perf_counter() - started
    started = time.perf_counter()
    for key in trace:
        forest.best_match(key)
    rates["PrefixForest (router)"] = (len(trace) / insert_s, len(trace) / (time.perf_counter() - started))
    forest.check_invariants()
    slots = [np.arange(1, len(key) + 1, dtype=np.int32) for key in trace]
    started = time.perf_counter()
    for key, key_slots in zip(trace, slots, strict=True):
        tree.insert(key, key_slots)
    insert_s = time.perf_counter() - started
    started = time.perf_counter()
    for key in trace:
        tree.match_prefix_len(key)
    rates["RadixTree (KV cache)"] = (len(trace) / insert_s, len(trace) / (time.perf_counter() - started))
    return rates


# Llama-3-8B's layer shapes; the vocabulary stays the tiny tokenizer's.
LLAMA3_8B_BODY = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}


def worker_model(body: str) -> tuple[Path, list[str]]:
    """The model directory the workers serve and the extra server flags it needs."""
    from sglr.testing.tiny import tiny_model_path

    tiny_dir = Path(tiny_model_path("llama"))
    if body == "tiny":
        return tiny_dir, []
    model_dir = Path(tempfile.mkdtemp(prefix="sglr-router-dp-"))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(tiny_dir / name, model_dir / name)
    config = json.loads((tiny_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, **LLAMA3_8B_BODY}))
    return model_dir, ["--load-format", "dummy", "--dtype", "bfloat16"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-groups", type=int, default=32)
    parser.add_argument("--prompts-per-group", type=int, default=8)
    parser.add_argument("--system-len", type=int, default=256)
    parser.add_argument("--question-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-total-tokens", type=int, default=16384, help="KV size of each worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="also write the table here")
    parser.add_argument("--device", default="cpu", help="the workers' device (both share it)")
    parser.add_argument(
        "--body", choices=("tiny", "llama3-8b"), default="tiny",
        help="the workers' layers: the tiny model's, or Llama-3-8B's shapes with random weights",
    )  # fmt: skip
    args = parser.parse_args()

    model_dir, model_flags = worker_model(args.body)
    vocab_size = json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"]
    requests = shared_prefix_dataset(
        args.num_groups, args.prompts_per_group, args.system_len, args.question_len,
        args.output_len, vocab_size, args.seed,
    )  # fmt: skip
    worker_argv = ["-m", "sglr", "--model-path", str(model_dir), "--port", "0", "--device", args.device,
                   "--max-total-tokens", str(args.max_total_tokens), "--log-level", "warning", *model_flags]  # fmt: skip
    workers = [spawn(worker_argv) for _ in range(2)]
    worker_urls = [url for _, url in workers]
    rows: list[tuple[str, dict]] = []
    try:
        # Warm both workers alike (first forwards allocate and compile), so no run pays for it.
        for url in worker_urls:
            asyncio.run(run_workload(url, requests[: args.concurrency], args.concurrency))
        rows.append(
            ("dp=1 (reference)", run_policy("cache-aware", worker_urls[:1], requests, args.concurrency))
        )
        for policy in ("cache-aware", "round-robin", "shortest-queue"):
            rows.append((f"dp=2 {policy}", run_policy(policy, worker_urls, requests, args.concurrency)))
        router, router_url = spawn(
            ["-m", router_module(), "--port", "0", "--log-level", "warning",
             "--worker-urls", worker_urls[0]]
        )  # fmt: skip
        try:
            direct_ms, routed_ms, _ = hop_overhead_ms(router_url, worker_urls[0])
        finally:
            stop(router)
    finally:
        for process, _ in workers:
            stop(process)
    instant, instant_url = spawn([str(Path(__file__).parent / "benchlib" / "instant_worker.py")])
    try:
        router, router_url = spawn(
            ["-m", router_module(), "--port", "0", "--log-level", "warning",
             "--worker-urls", instant_url]
        )  # fmt: skip
        try:
            instant_direct_ms, instant_routed_ms, router_cpu_us = hop_overhead_ms(
                router_url, instant_url, num=500, router=router
            )
        finally:
            stop(router)
    finally:
        stop(instant)
    decision_us = routing_decision_us(requests)
    rates = tree_rates()

    reference = rows[0][1]["hit_rate"]
    lines = [
        f"Workload: {len(requests)} requests, {args.num_groups} prefix groups x {args.prompts_per_group}, "
        f"system {args.system_len} + question {args.question_len} tokens, {args.output_len} output tokens, "
        f"concurrency {args.concurrency}; {'tiny llama' if args.body == 'tiny' else 'Llama-3-8B layers (bf16, random weights)'} "
        f"on {args.device}, {args.max_total_tokens} KV tokens per worker; "
        "sglr-router in front of sglr-server workers.",
        "",
        "| run | hit rate | vs dp=1 | req/s | TTFT p50 ms | TTFT p99 ms | failed | requests per worker |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in rows:
        lines.append(
            f"| {name} | {row['hit_rate']:.1%} | {row['hit_rate'] / reference:.1%} | {row['throughput']:.1f} | "
            f"{row['ttft_p50']:.1f} | {row['ttft_p99']:.1f} | {row['failed']} | {row['split']} |"
        )
    lines += [
        "",
        "| router cost | value |",
        "| --- | ---: |",
        f"| choosing a worker (parse + key + cache-aware route + finish), per request | {decision_us:.1f} us |",
        f"| 1-token request straight to a worker, median | {direct_ms:.2f} ms |",
        f"| the same through sglr-router, median | {routed_ms:.2f} ms |",
        f"| HTTP hop added by the router | {routed_ms - direct_ms:.2f} ms |",
        f"| the same request to a stand-in worker that answers at once, direct / via router, median | "
        f"{instant_direct_ms:.2f} / {instant_routed_ms:.2f} ms |",
        f"| HTTP hop added by the router, stand-in worker | {instant_routed_ms - instant_direct_ms:.2f} ms |",
        f"| router CPU time per request, stand-in worker | {router_cpu_us:.0f} us |",
        f"| load average (1 min) at the end | {os.getloadavg()[0]:.2f} |",
    ]
    lines += [
        "",
        "| heavy radix trace (2,000 keys of 1-4k tokens) | inserts /s | lookups /s |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {name} | {insert:,.0f} | {match:,.0f} |" for name, (insert, match) in rates.items()]
    table = "\n".join(lines)
    print(table)
    if args.output:
        args.output.write_text(f"# `python benches/router_dp.py`\n\n{table}\n")


if __name__ == "__main__":
    main()
