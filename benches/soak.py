"""Soak and chaos: `sglr-router` in front of two `sglr-server`s (one of them tensor-parallel,
tp=2) on a tiny LLaVA checkpoint, under mixed load for `--duration` seconds while faults are
injected, and a verdict on what a client saw.

Load: `--concurrency` clients send native and OpenAI requests, streamed and not, constrained
(regex, JSON schema), tool calls, images and a LoRA adapter's requests; some leave mid-way, read slowly or abort; some
send malformed, hostile or oversized bodies. Faults: a worker SIGKILLed (the server restarted
by this script, as a supervisor would), a worker SIGSTOPped and resumed, the router restarted.

It checks: every request ends with a result or a typed error; only requests running on the
killed worker fail; bad inputs get a 4xx; each server's KV accounting holds at the end
(`/debug/check_invariants`); resident memory grows at most 5% over the second half; no process
outlives the run. One table, then the problems; exit status 1 when there is any.

    .venv/bin/python benches/soak.py --duration 1800          # the 30-minute soak
    .venv/bin/python benches/soak.py --duration 60 --json out.json   # scripts/test's variant
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, os.path.dirname(__file__))

from soaklib.cluster import Cluster
from soaklib.faults import FaultWindow, inject_faults
from soaklib.report import RssSample, SoakReport, table
from soaklib.requests import SOAK_ADAPTER, bad_call, good_call
from soaklib.traffic import BEHAVIOURS, Outcome, send

CONTEXT_LEN = 4096
BAD_INPUT_SHARE = 0.12
REQUEST_TIMEOUT_S = 120.0
logger = logging.getLogger("soak")


async def client_loop(
    index: int, cluster: Cluster, deadline: float, seed: int, outcomes: list[Outcome]
) -> None:
    rng = random.Random(seed * 1000 + index)
    shared_prefix = " ".join(rng.choice(["system", "rules", "answer", "briefly"]) for _ in range(40)) + ". "
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(REQUEST_TIMEOUT_S)) as client:
        while time.monotonic() < deadline:
            if rng.random() < BAD_INPUT_SHARE:
                call = bad_call(rng, CONTEXT_LEN, cluster.max_body_bytes)
            else:
                call = good_call(rng, shared_prefix)
            outcomes.append(
                await send(client, cluster.router_url, call, rng.choice(BEHAVIOURS), rng, REQUEST_TIMEOUT_S)
            )


async def sample_rss(cluster: Cluster, deadline: float, samples: list[RssSample]) -> None:
    while time.monotonic() < deadline:
        samples.append(RssSample(time.monotonic(), await asyncio.to_thread(cluster.rss_bytes)))
        cluster.remember()
        await asyncio.sleep(1.0)


async def run(cluster: Cluster, duration_s: float, concurrency: int, seed: int) -> SoakReport:
    outcomes: list[Outcome] = []
    windows: list[FaultWindow] = []
    rss: list[RssSample] = []
    started = time.monotonic()
    deadline = started + duration_s
    clients = [client_loop(i, cluster, deadline, seed, outcomes) for i in range(concurrency)]
    faults = inject_faults(cluster, started, duration_s, windows)
    await asyncio.gather(*clients, faults, sample_rss(cluster, deadline, rss))
    restarted_at = {spec.name: t for spec in cluster.servers if (t := cluster.last_started.get(spec.name))}
    restarted_at["router"] = cluster.last_started.get("router", 0.0)
    invariants = await asyncio.to_thread(check_servers, cluster)
    return SoakReport(
        time.monotonic() - started, outcomes, windows, rss, restarted_at, invariants, [], started
    )


def check_servers(cluster: Cluster) -> dict[str, str]:
    """Each server's accounting once it is idle (what the clients left is aborted by then)."""
    verdicts = {}
    for spec in cluster.servers:
        deadline = time.monotonic() + 60
        verdict = "not idle within 60 s"
        while time.monotonic() < deadline:
            response = httpx.get(f"{spec.url}/debug/check_invariants", timeout=60)
            if response.status_code != 200:
                verdict = f"{response.status_code}: {response.text[:200]}"
                break
            stats = response.json()["stats"]
            if stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0:
                held = stats["num_kv_slots"] - stats["num_free_kv_slots"] - stats["num_cached_kv_slots"]
                verdict = "ok" if held == 0 else f"{held} KV slots still held while idle"
                break
            time.sleep(0.2)
        verdicts[spec.name] = verdict
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--concurrency", type=int, default=12, help="clients at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[soak %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from sglr.model.config import load_model_config
    from sglr.testing.tiny_llava import write_llava_checkpoint
    from sglr.testing.tiny_lora import write_random_adapter

    with tempfile.TemporaryDirectory(prefix="sglr-soak-") as tmp:
        model_dir = write_llava_checkpoint(Path(tmp) / "llava", seed=4)
        adapter = write_random_adapter(load_model_config(model_dir), Path(tmp) / "adapter", rank=8,
                                       target_modules=("q_proj", "v_proj", "down_proj"))  # fmt: skip
        cluster = Cluster(model_dir, lora_paths=(f"{SOAK_ADAPTER}={adapter}",))
        logger.info("starting the router and two servers (tp=1, tp=2) on %s", model_dir.name)
        cluster.start()
        try:
            logger.info(
                "load for %.0f s with %d clients; faults at fixed points", args.duration, args.concurrency
            )
            report = asyncio.run(run(cluster, args.duration, args.concurrency, args.seed))
        finally:
            orphans = cluster.stop()
            outputs = cluster.outputs()
        report.orphans = orphans
        summary = report.judge()
    print(table(summary))
    for problem in summary["problems"]:
        print("PROBLEM:", problem)
    if summary["problems"]:
        for role, output in outputs:
            lines = [line for line in output.splitlines() if line.strip()]
            if lines:
                print(f"--- {role} printed (last 40 lines):", *lines[-40:], sep="\n")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
