"""The router's HTTP hop, A/B: `sglr-router` from two source trees side by side in one run, in
front of one stand-in worker that answers at once (`benchlib/instant_worker.py`), so the
router's own cost is all that differs.

Each repeat runs every tree's router in turn (the order alternates between repeats, so drift on
a shared machine hits both alike) and measures: the median latency of a small `/generate`
request straight to the worker and through the router (interleaved halves, as
`router_dp.py`'s hop), their difference (the hop), and the router process's CPU time per
routed request (`benchlib/process_cpu.py`). Reported: the median of each over the repeats, and
the load average.

    python benches/router_hop_ab.py --tree main=/work/main/python --tree new=python
    python benches/router_hop_ab.py --tree new=python --prompt-len 288 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

import httpx

from benchlib.process_cpu import cpu_seconds
from router_dp import router_module, spawn, stop


def median_ms(client: httpx.Client, body: dict, num: int) -> float:
    samples = []
    for _ in range(num):
        started = time.perf_counter()
        client.post("/generate", json=body).raise_for_status()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def measure(tree: str, worker_url: str, body: dict, num: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
    router, router_url = spawn(
        ["-m", router_module(tree), "--port", "0", "--log-level", "warning",
         "--worker-urls", worker_url], env
    )  # fmt: skip
    try:
        with (
            httpx.Client(base_url=worker_url, timeout=60) as direct,
            httpx.Client(base_url=router_url, timeout=60) as routed,
        ):
            for client in (direct, routed):  # warm the connections (and the router's upstream)
                for _ in range(20):
                    client.post("/generate", json=body).raise_for_status()
            direct_ms, routed_ms, cpu_s = [], [], 0.0
            for _ in range(2):  # interleaved halves
                direct_ms.append(median_ms(direct, body, num // 2))
                before = cpu_seconds(router.pid)
                routed_ms.append(median_ms(routed, body, num // 2))
                cpu_s += cpu_seconds(router.pid) - before
    finally:
        stop(router)
    direct_median, routed_median = statistics.fmean(direct_ms), statistics.fmean(routed_ms)
    return {
        "direct_ms": direct_median,
        "routed_ms": routed_median,
        "hop_ms": routed_median - direct_median,
        "cpu_us": cpu_s / (2 * (num // 2)) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a python/ source tree")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=1000, help="routed requests per repeat and tree")
    parser.add_argument("--prompt-len", type=int, default=3, help="token ids in each request")
    args = parser.parse_args()
    trees = [tuple(spec.split("=", 1)) for spec in args.tree]
    body = {"input_ids": list(range(1, args.prompt_len + 1)), "sampling_params": {"max_new_tokens": 1}}
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    loads = [os.getloadavg()[0]]
    instant, instant_url = spawn([str(Path(__file__).parent / "benchlib" / "instant_worker.py")])
    try:
        for repeat in range(args.repeats):
            order = trees if repeat % 2 == 0 else trees[::-1]
            for name, tree in order:
                results[name].append(measure(tree, instant_url, body, args.requests))
                row = results[name][-1]
                print(
                    f"repeat {repeat} {name}: hop {row['hop_ms']:.3f} ms, "
                    f"router CPU {row['cpu_us']:.0f} us/request",
                    flush=True,
                )
            loads.append(os.getloadavg()[0])
    finally:
        stop(instant)
    print()
    print(
        f"{args.repeats} repeats x {args.requests} requests of {args.prompt_len} token ids, "
        f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}"
    )
    print("| router | direct ms | via router ms | hop ms | router CPU us / request |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rows in results.items():
        medians = {field: statistics.median(row[field] for row in rows) for field in rows[0]}
        print(
            f"| {name} | {medians['direct_ms']:.3f} | {medians['routed_ms']:.3f} | "
            f"**{medians['hop_ms']:.3f}** | {medians['cpu_us']:.0f} |"
        )


if __name__ == "__main__":
    main()
