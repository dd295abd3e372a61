"""A batch beside live traffic: does running a large batch (`/v1/batches`) hurt live requests?

Starts sglr-server (the seeded tiny model on CPU by default), measures the time to first token
of live streaming chat requests sent at a fixed rate, alone (before and after the batch), and
while a batch of short completions runs (at `--batch-max-concurrency` lines at a time, low priority), and prints both
TTFT medians, their ratio and the batch's completion time as a markdown table.

    .venv/bin/python benches/batch_beside_live.py                     # ~1-2 minutes on 2 cores
    .venv/bin/python benches/batch_beside_live.py --num-batch-lines 200 --live-rate 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

import httpx

sys.path.insert(0, os.path.dirname(__file__))
from benchlib.server_process import launch_server


async def _live_request(client: httpx.AsyncClient, index: int, max_tokens: int) -> float:
    """Seconds to the first streamed content of one chat request."""
    body = {"model": "default", "messages": [{"role": "user", "content": f"live question number {index}"}],
            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}  # fmt: skip
    started = time.perf_counter()
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0]["delta"] if json.loads(line[6:])["choices"] else {}
                if delta.get("content"):
                    return time.perf_counter() - started
    raise RuntimeError("the live request streamed no content")


async def _live_phase(client: httpx.AsyncClient, rate: float, max_tokens: int, until) -> list[float]:
    """Live requests every 1/rate seconds until `until()` is true; their TTFTs."""
    tasks = []
    index = 0
    next_at = time.perf_counter()
    while not until():
        tasks.append(asyncio.create_task(_live_request(client, index, max_tokens)))
        index += 1
        next_at += 1.0 / rate
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    return list(await asyncio.gather(*tasks))


def _batch_file(num_lines: int, max_tokens: int) -> bytes:
    lines = [{"custom_id": f"line-{i}", "method": "POST", "url": "/v1/completions",
              "body": {"model": "default", "prompt": f"batch prompt {i}", "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True}} for i in range(num_lines)]  # fmt: skip
    return "\n".join(json.dumps(line) for line in lines).encode()


async def _run(url: str, args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        # Warm-up: the first steps of each batch size are slower (allocations), live and batch alike.
        await _live_phase(client, args.live_rate, args.live_max_tokens, _count_down(5))
        await _run_batch(client, _batch_file(100, args.batch_max_tokens), lambda: None)
        # Alone before and after the batch (half each): load that drifts over the run counts in both.
        num_alone = int(args.live_rate * args.alone_s / 2)
        alone = await _live_phase(client, args.live_rate, args.live_max_tokens, _count_down(num_alone))
        done: dict = {}
        batch_run = asyncio.create_task(
            _run_batch(
                client, _batch_file(args.num_batch_lines, args.batch_max_tokens), lambda: done.update(at=1)
            )
        )
        beside = await _live_phase(client, args.live_rate, args.live_max_tokens, lambda: "at" in done)
        batch, batch_s = await batch_run
        alone += await _live_phase(client, args.live_rate, args.live_max_tokens, _count_down(num_alone))
    return {
        "alone": alone,
        "beside": beside,
        "batch_s": batch_s,
        "batch": batch,
        "counts": batch["request_counts"],
    }


async def _run_batch(client: httpx.AsyncClient, data: bytes, on_done) -> tuple[dict, float]:
    """Uploads `data`, runs it as a batch, polls it to the end: (the batch, seconds it took)."""
    upload = await client.post("/v1/files", files={"file": ("batch.jsonl", data)}, data={"purpose": "batch"})
    upload.raise_for_status()
    created = await client.post(
        "/v1/batches",
        json={
            "input_file_id": upload.json()["id"],
            "endpoint": "/v1/completions",
            "completion_window": "24h",
        },
    )
    created.raise_for_status()
    started = time.perf_counter()
    batch = created.json()
    while batch["status"] not in ("completed", "failed", "cancelled"):
        await asyncio.sleep(0.2)
        batch = (await client.get(f"/v1/batches/{batch['id']}")).json()
    on_done()  # the live phase beside it stops now
    return batch, time.perf_counter() - started


def _count_down(num: int):
    left = [num]

    def until() -> bool:
        left[0] -= 1
        return left[0] < 0

    return until


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--model-path", default="tiny", help="'tiny': the seeded tiny test model")
    add("--num-batch-lines", type=int, default=1000)
    add("--batch-max-tokens", type=int, default=4)
    add("--batch-max-concurrency", type=int, default=2)
    add("--live-rate", type=float, default=5.0, help="live requests per second")
    add("--live-max-tokens", type=int, default=8)
    add("--alone-s", type=float, default=15.0, help="seconds of live traffic without the batch")
    add("--server-args", default="", help="more sglr-server flags")
    args = parser.parse_args()
    model = args.model_path
    if model == "tiny":
        from sglr.testing.tiny import tiny_model_path

        model = str(tiny_model_path("llama"))
    with tempfile.TemporaryDirectory() as storage:
        argv = ["--model-path", model, "--batch-storage-dir", storage,
                "--batch-max-concurrency", str(args.batch_max_concurrency), *args.server_args.split()]  # fmt: skip
        process, url = launch_server(argv)
        try:
            result = asyncio.run(_run(url, args))
        finally:
            process.terminate()
            process.wait(timeout=60)
    alone, beside = statistics.median(result["alone"]), statistics.median(result["beside"])
    counts = result["counts"]
    print(f"model {args.model_path}; live: {args.live_rate}/s streaming chat, max_tokens {args.live_max_tokens}; "
          f"batch: {args.num_batch_lines} completions, max_tokens {args.batch_max_tokens}, "
          f"{args.batch_max_concurrency} at a time\n")  # fmt: skip
    print("| live TTFT p50 alone | live TTFT p50 beside the batch | ratio | live requests (alone / beside) "
          "| batch completion | batch lines completed / failed |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print(f"| {alone * 1000:.1f} ms | {beside * 1000:.1f} ms | {beside / alone:.2f} | "
          f"{len(result['alone'])} / {len(result['beside'])} | {result['batch_s']:.1f} s "
          f"({result['batch']['status']}) | {counts['completed']} / {counts['failed']} |")  # fmt: skip


if __name__ == "__main__":
    main()
