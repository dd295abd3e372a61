"""Load: 256 concurrent streaming clients with random prompts and lengths over all three
generation routes. Every client gets a complete, well-formed stream; greedy outputs equal the
engine's own; afterwards nothing runs and no KV slot is leaked."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest
from server_harness import Served, served_engine

from sglr.server import ServerSettings
from sse_client import parse_sse

NUM_CLIENTS = 256
TIME_LIMIT_S = 240


@pytest.fixture(scope="module")
def loaded(tiny_dir):
    # A KV pool too small for everything at once: admission waits and retraction happen.
    with served_engine(
        tiny_dir, ServerSettings(enable_metrics=True), max_total_tokens=6000, max_running_requests=64
    ) as served:
        yield served


def _specs(seed: int) -> list[dict]:
    rng = random.Random(seed)
    specs = []
    for i in range(NUM_CLIENTS):
        ids = [rng.randrange(5, 4000) for _ in range(rng.randrange(1, 160))]
        max_new = rng.randrange(1, 48)
        greedy = rng.random() < 0.5
        sampling = {"temperature": 0} if greedy else {"temperature": rng.uniform(0.5, 1.2), "seed": i}
        specs.append({"id": i, "ids": ids, "max_new": max_new, "greedy": greedy, "sampling": sampling,
                      "route": rng.choice(["native", "native", "completions", "chat"])})  # fmt: skip
    return specs


def _request(spec: dict) -> tuple[str, dict]:
    if spec["route"] == "native":
        params = {"max_new_tokens": spec["max_new"], "ignore_eos": True, **spec["sampling"]}
        return "/generate", {"input_ids": spec["ids"], "sampling_params": params, "stream": True}
    common = {"max_tokens": spec["max_new"], "ignore_eos": True, "stream": True, **spec["sampling"]}
    common["stream_options"] = {"include_usage": True}
    if spec["route"] == "completions":
        return "/v1/completions", {"prompt": spec["ids"], **common}
    text = " ".join(str(t) for t in spec["ids"][:40])
    return "/v1/chat/completions", {"messages": [{"role": "user", "content": text}], **common}


def _check(spec: dict, events: list) -> str | None:
    """The generated text; asserts the stream's shape for its route."""
    if spec["route"] == "native":
        final = events[-1]
        assert final["meta_info"]["finish_reason"] == {"type": "length", "length": spec["max_new"]}
        assert len(final["output_ids"]) == final["meta_info"]["completion_tokens"] == spec["max_new"]
        assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])
        spec["output_ids"] = final["output_ids"]
        return final["text"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == spec["max_new"]
    choices = [e["choices"][0] for e in events[:-1]]
    assert [c["finish_reason"] for c in choices].count("length") == 1 and choices[-1][
        "finish_reason"
    ] == "length"
    key = "text" if spec["route"] == "completions" else "delta"
    if key == "text":
        return "".join(c["text"] for c in choices)
    return "".join(c["delta"].get("content") or "" for c in choices)


async def _run_all(served: Served, specs: list[dict]) -> list[dict]:
    limits = httpx.Limits(max_connections=NUM_CLIENTS + 8, max_keepalive_connections=NUM_CLIENTS + 8)
    async with httpx.AsyncClient(base_url=served.url, timeout=TIME_LIMIT_S, limits=limits) as client:

        async def one(spec: dict) -> dict:
            route, body = _request(spec)
            async with client.stream("POST", route, json=body) as response:
                assert response.status_code == 200, await response.aread()
                raw = (await response.aread()).decode()
            spec["text"] = _check(spec, parse_sse(raw))
            return spec

        async def scrape() -> list[int]:
            codes = []
            for _ in range(5):
                await asyncio.sleep(0.3)
                codes.append((await client.get("/metrics")).status_code)
                codes.append((await client.get("/server_info")).status_code)
            return codes

        results = await asyncio.gather(*(one(s) for s in specs), scrape())
    assert set(results[-1]) == {200}
    return results[:-1]


@pytest.mark.tp2
def test_256_concurrent_streaming_clients(loaded: Served) -> None:
    specs = _specs(seed=3)
    done = asyncio.run(asyncio.wait_for(_run_all(loaded, specs), TIME_LIMIT_S))
    assert len(done) == NUM_CLIENTS and all("text" in s for s in done)
    loaded.assert_no_leaks()
    stats = loaded.engine.get_stats()
    assert stats["num_aborted"] == 0
    assert stats["num_finished"] >= NUM_CLIENTS
    # Greedy native streams produced exactly what the engine produces for the same input.
    greedy = [s for s in done if s["route"] == "native" and s["greedy"]]
    expected = loaded.engine.generate(
        input_ids=[s["ids"] for s in greedy],
        sampling_params=[
            {"max_new_tokens": s["max_new"], "ignore_eos": True, "temperature": 0} for s in greedy
        ],
    )
    assert [s["output_ids"] for s in greedy] == [r["output_ids"] for r in expected]
    assert [s["text"] for s in greedy] == [r["text"] for r in expected]
    metrics = httpx.get(loaded.url + "/metrics").text
    requests = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("sglr:num_requests_total")
    )
    assert requests == NUM_CLIENTS
    assert json.dumps(stats)  # stats stay JSON-serialisable under load
