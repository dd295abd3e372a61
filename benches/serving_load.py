"""Serving load generator for sglr-server (or any SGLang-native / OpenAI-compatible server).

Sends a synthetic workload (see benchlib/serving_datasets.py) as streaming requests, at a
Poisson request rate or all at once, optionally capped by a concurrency limit, and reports
throughput and latency percentiles: TTFT (time to first token), TPOT (per request,
(latency - TTFT) / (output tokens - 1)), ITL (gaps between streamed chunks, per token) and E2E
latency. With `--launch`, it starts a local sglr-server first and reads the engine's busy time
from /server_info, so the table also shows how much of the wall time the model ran.

    python benches/serving_load.py --launch "--model-path tiny" --num-prompts 400
    python benches/serving_load.py --base-url http://127.0.0.1:30000 --api chat \\
        --dataset generated-shared-prefix --request-rate 8 --max-concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import httpx

from benchlib.server_process import launch_server
from benchlib.serving_datasets import BenchRequest, random_dataset, shared_prefix_dataset


@dataclass
class Outcome:
    ok: bool = False
    error: str = ""
    ttft: float = 0.0
    latency: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    itls: list[float] = field(default_factory=list)
    started_at: float = field(default_factory=time.perf_counter)
    last_token_at: float = 0.0

    def on_tokens(self, num_new: int) -> None:
        """Records `num_new` tokens that arrived now; tokens that arrive together share the gap
        since the previous arrival (the first token's gap is the TTFT instead)."""
        if num_new <= 0:
            return
        now = time.perf_counter()
        if self.ttft == 0.0:
            self.ttft = now - self.started_at
            self.last_token_at = now
            num_new -= 1
        if num_new > 0:
            self.itls.extend([(now - self.last_token_at) / num_new] * num_new)
        self.last_token_at = now


def _request_body(api: str, req: BenchRequest) -> tuple[str, dict]:
    if api == "native":
        params = {"max_new_tokens": req.output_len, "ignore_eos": True, "temperature": 0}
        return "/generate", {"input_ids": req.prompt_ids, "sampling_params": params, "stream": True}
    common = {"max_tokens": req.output_len, "ignore_eos": True, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}  # fmt: skip
    if api == "completions":
        return "/v1/completions", {"prompt": req.prompt_ids, **common}
    return "/v1/chat/completions", {"messages": [{"role": "user", "content": req.prompt_text}], **common}


def _tokens_in(api: str, event: dict, seen: int) -> tuple[int, int, int | None]:
    """(new tokens in this event, total seen, prompt tokens if the event says)."""
    if api == "native":
        meta = event["meta_info"]
        total = meta["completion_tokens"]
        return total - seen, total, meta["prompt_tokens"]
    if event.get("usage"):
        usage = event["usage"]
        return 0, seen, usage["prompt_tokens"]
    choice = event["choices"][0] if event["choices"] else {}
    piece = choice.get("text") if api == "completions" else (choice.get("delta") or {}).get("content")
    return (1, seen + 1, None) if piece else (0, seen, None)


async def _one(client: httpx.AsyncClient, api: str, req: BenchRequest) -> Outcome:
    route, body = _request_body(api, req)
    out = Outcome()

    seen = 0
    try:
        async with client.stream("POST", route, json=body) as response:
            if response.status_code != 200:
                out.error = f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
                return out
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    out.error = event["error"].get("message", "error event")
                    return out
                new, seen, prompt_tokens = _tokens_in(api, event, seen)
                if prompt_tokens is not None:
                    out.input_tokens = prompt_tokens
                out.on_tokens(new)
    except httpx.HTTPError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    out.latency = time.perf_counter() - out.started_at
    out.output_tokens = seen
    out.ok = seen > 0
    return out


Sender = Callable[[BenchRequest], Awaitable[Outcome]]


async def run_load(
    args: argparse.Namespace, send: Sender, requests: list[BenchRequest]
) -> tuple[list[Outcome], float]:
    """Sends `requests` at `--request-rate` (Poisson) under `--max-concurrency`."""
    semaphore = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    rng = random.Random(args.seed)

    async def limited(req: BenchRequest) -> Outcome:
        if semaphore is None:
            return await send(req)
        async with semaphore:
            return await send(req)

    tasks = []
    start = time.perf_counter()
    for req in requests:
        tasks.append(asyncio.create_task(limited(req)))
        if args.request_rate != float("inf"):
            await asyncio.sleep(rng.expovariate(args.request_rate))
    outcomes = await asyncio.gather(*tasks)
    return list(outcomes), time.perf_counter() - start


async def run_http(
    args: argparse.Namespace, base_url: str, requests: list[BenchRequest]
) -> tuple[list[Outcome], float]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=base_url, timeout=None, limits=limits, headers=headers) as client:
        return await run_load(args, lambda req: _one(client, args.api, req), requests)


async def _one_in_process(engine: Any, req: BenchRequest) -> Outcome:
    """The same request through `Engine.async_generate` (streaming, detokenized), no HTTP."""
    out = Outcome(input_tokens=len(req.prompt_ids))
    params = {"max_new_tokens": req.output_len, "ignore_eos": True, "temperature": 0}

    stream = await engine.async_generate(input_ids=req.prompt_ids, sampling_params=params, stream=True)
    async for delta in stream:
        new = len(delta["output_ids"])
        out.on_tokens(new)
        out.output_tokens += new
    out.latency = time.perf_counter() - out.started_at
    out.ok = out.output_tokens > 0
    return out


def run_in_process(
    args: argparse.Namespace, requests: list[BenchRequest], warm: list[BenchRequest]
) -> tuple[list[Outcome], float]:
    from sglr.engine.engine import Engine
    from sglr.server.launch import build_parser, engine_options

    options = build_parser().parse_args(_server_argv(args.launch))
    engine = Engine(model_path=options.model_path, **engine_options(options))
    try:
        no_limits = argparse.Namespace(
            **{**vars(args), "max_concurrency": None, "request_rate": float("inf")}
        )
        asyncio.run(run_load(no_limits, lambda req: _one_in_process(engine, req), warm))

        async def go() -> tuple[list[Outcome], float]:
            return await run_load(args, lambda req: _one_in_process(engine, req), requests)

        return asyncio.run(go())
    finally:
        engine.shutdown()


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summarize(outcomes: list[Outcome], duration: float) -> dict:
    done = [o for o in outcomes if o.ok]
    tpots = [(o.latency - o.ttft) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    series = {
        "ttft_ms": [o.ttft * 1e3 for o in done],
        "tpot_ms": [t * 1e3 for t in tpots],
        "itl_ms": [t * 1e3 for o in done for t in o.itls],
        "e2e_ms": [o.latency * 1e3 for o in done],
    }
    summary = {
        "completed": len(done),
        "failed": len(outcomes) - len(done),
        "duration_s": duration,
        "request_throughput": len(done) / duration,
        "input_tokens": sum(o.input_tokens for o in done),
        "output_tokens": sum(o.output_tokens for o in done),
        "output_throughput": sum(o.output_tokens for o in done) / duration,
        "total_throughput": sum(o.input_tokens + o.output_tokens for o in done) / duration,
    }
    for name, values in series.items():
        summary[name] = {
            "mean": statistics.fmean(values) if values else float("nan"),
            "p50": _pct(values, 50),
            "p90": _pct(values, 90),
            "p99": _pct(values, 99),
        }
    errors = sorted({o.error for o in outcomes if not o.ok})
    if errors:
        summary["errors"] = errors[:5]
    return summary


def print_table(summary: dict, engine: dict | None) -> None:
    print(f"{'completed / failed':<34}{summary['completed']} / {summary['failed']}")
    print(f"{'duration (s)':<34}{summary['duration_s']:.2f}")
    print(f"{'requests/s':<34}{summary['request_throughput']:.2f}")
    print(f"{'input tokens / output tokens':<34}{summary['input_tokens']} / {summary['output_tokens']}")
    print(f"{'output tokens/s':<34}{summary['output_throughput']:.1f}")
    print(f"{'total tokens/s':<34}{summary['total_throughput']:.1f}")
    print(f"{'':<12}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}   (ms)")
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        row = summary[name]
        print(f"{name[:-3].upper():<12}" + "".join(f"{row[k]:>10.2f}" for k in ("mean", "p50", "p90", "p99")))
    if engine:
        print(f"{'engine busy (s) / share of wall':<34}{engine['busy_s']:.2f} / {engine['busy_share']:.0%}")
        print(f"{'engine ms per forward pass':<34}{engine['ms_per_pass']:.2f}  ({engine['passes']} passes)")
        print(f"{'engine busy ms per output token':<34}{engine['busy_ms_per_token']:.3f}")
        if "http_cpu_ms_per_token" in engine:
            print(f"{'server CPU ms per output token':<34}HTTP thread {engine['http_cpu_ms_per_token']:.3f}, "
                  f"engine + torch threads {engine['other_cpu_ms_per_token']:.3f}")  # fmt: skip
        print(f"{'load generator CPU ms per token':<34}{engine['client_cpu_ms_per_token']:.3f}")
    for error in summary.get("errors", []):
        print("error:", error)


def _engine_counters(client: httpx.Client) -> dict:
    return client.get("/server_info").json()["internal_states"][0]


def _cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(main thread, whole process) CPU seconds from /proc (Linux). sglr-server runs the HTTP
    event loop on its main thread; the engine's scheduler loop and torch run on others."""
    ticks = os.sysconf("SC_CLK_TCK")

    def read(path: str) -> float:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    try:
        return read(f"/proc/{pid}/task/{pid}/stat"), read(f"/proc/{pid}/stat")
    except OSError:
        return None


def _server_argv(extra: str) -> list[str]:
    argv = extra.split()
    if "tiny" in argv:  # "--model-path tiny": the seeded tiny test model
        from sglr.testing.tiny import tiny_model_path

        argv[argv.index("tiny")] = str(tiny_model_path("llama"))
    return argv


def _launch(extra: str) -> tuple[subprocess.Popen, str]:
    return launch_server(_server_argv(extra))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--base-url", default="http://127.0.0.1:30000")
    add(
        "--launch",
        default=None,
        metavar="ARGS",
        help='start a local sglr-server with these flags, e.g. "--model-path tiny"',
    )
    add("--api", choices=("native", "completions", "chat"), default="native")
    add("--api-key", default=None)
    add("--dataset", choices=("random", "generated-shared-prefix"), default="random")
    add("--num-prompts", type=int, default=200)
    add("--random-input-len", type=int, default=256)
    add("--random-output-len", type=int, default=64)
    add("--random-range-ratio", type=float, default=0.5)
    add("--gsp-num-groups", type=int, default=8)
    add("--gsp-prompts-per-group", type=int, default=16)
    add("--gsp-system-prompt-len", type=int, default=512)
    add("--gsp-question-len", type=int, default=64)
    add("--gsp-output-len", type=int, default=32)
    add(
        "--request-rate", type=float, default=float("inf"), help="requests/s (Poisson); inf sends all at once"
    )
    add("--max-concurrency", type=int, default=None)
    add("--warmup", type=int, default=4)
    add("--seed", type=int, default=1)
    add(
        "--compare-in-process",
        action="store_true",
        help="afterwards, run the same requests on an in-process engine (same flags) for the HTTP overhead",
    )
    add("--output-json", default=None)
    args = parser.parse_args()  # fmt: skip

    process = None
    base_url = args.base_url
    if args.launch is not None:
        process, base_url = _launch(args.launch)
    try:
        info = httpx.get(base_url + "/get_model_info", timeout=30).json()
        vocab = int(info.get("vocab_size") or 32000)
        requests = _dataset(args, vocab)
        warm = random_dataset(args.warmup, 16, 4, 1.0, vocab, seed=args.seed + 1)
        no_limits = argparse.Namespace(
            **{**vars(args), "max_concurrency": None, "request_rate": float("inf")}
        )
        asyncio.run(run_http(no_limits, base_url, warm))
        headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
        with httpx.Client(base_url=base_url, timeout=30, headers=headers) as client:
            before = _engine_counters(client) if process is not None else None
            cpu_before = _cpu_seconds(process.pid) if process is not None else None
            client_cpu = time.process_time()
            outcomes, duration = asyncio.run(run_http(args, base_url, requests))
            client_cpu = time.process_time() - client_cpu
            cpu_after = _cpu_seconds(process.pid) if process is not None else None
            after = _engine_counters(client) if process is not None else None
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
    summary = summarize(outcomes, duration)
    engine = None
    if before is not None and after is not None:
        busy = after["busy_seconds"] - before["busy_seconds"]
        passes = after["num_forward_passes"] - before["num_forward_passes"]
        tokens = max(after["num_generated_tokens"] - before["num_generated_tokens"], 1)
        engine = {"busy_s": busy, "busy_share": busy / duration, "passes": passes,
                  "ms_per_pass": busy / max(passes, 1) * 1e3, "busy_ms_per_token": busy / tokens * 1e3}  # fmt: skip
        if cpu_before is not None and cpu_after is not None:
            engine["http_cpu_ms_per_token"] = (cpu_after[0] - cpu_before[0]) / tokens * 1e3
            engine["other_cpu_ms_per_token"] = (
                ((cpu_after[1] - cpu_before[1]) - (cpu_after[0] - cpu_before[0])) / tokens * 1e3
            )
        engine["client_cpu_ms_per_token"] = client_cpu / tokens * 1e3
    print(f"# {args.api} API, {args.dataset} dataset, {len(requests)} requests, rate {args.request_rate}, "
          f"max concurrency {args.max_concurrency}, model {info.get('model_path')}")  # fmt: skip
    print("## over HTTP (sglr-server)")
    print_table(summary, engine)
    report = {"args": vars(args), "summary": summary, "engine": engine}
    if args.compare_in_process:
        if args.launch is None:
            raise SystemExit(
                "--compare-in-process needs --launch (the in-process engine uses the same flags)"
            )
        direct, direct_duration = run_in_process(args, requests, warm)
        direct_summary = summarize(direct, direct_duration)
        print("## in process (Engine.async_generate, streaming; no HTTP)")
        print_table(direct_summary, None)
        print(f"{'server / in-process wall time':<34}{duration / direct_duration:.3f}")
        print(
            f"{'server / in-process mean ITL':<34}{summary['itl_ms']['mean'] / direct_summary['itl_ms']['mean']:.3f}"
        )
        report["in_process"] = direct_summary
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(report, f, indent=2)


def _dataset(args: argparse.Namespace, vocab: int) -> list[BenchRequest]:
    if args.dataset == "random":
        return random_dataset(args.num_prompts, args.random_input_len, args.random_output_len,
                              args.random_range_ratio, vocab, args.seed)  # fmt: skip
    return shared_prefix_dataset(args.gsp_num_groups, args.gsp_prompts_per_group, args.gsp_system_prompt_len,
                                 args.gsp_question_len, args.gsp_output_len, vocab, args.seed)  # fmt: skip


if __name__ == "__main__":
    main()
