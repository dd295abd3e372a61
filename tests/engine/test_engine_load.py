"""Engine under pressure: retraction on a tiny KV pool, hundreds of concurrent random requests
with stops and aborts, and nothing leaked afterwards."""

from __future__ import annotations

import asyncio
import random

from sglr.engine.engine import Engine

GREEDY = {"temperature": 0, "max_new_tokens": 40, "ignore_eos": True}


def prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(10, 4000) for _ in range(24)]
    return [shared + [rng.randrange(10, 4000) for _ in range(rng.randrange(4, 20))] for _ in range(n)]


def test_forced_retraction_keeps_greedy_outputs(tiny_dir, make_engine, engine: Engine) -> None:
    batch = prompts(12, seed=1)
    expected = [r["output_ids"] for r in engine.generate(input_ids=batch, sampling_params=GREEDY)]
    # 12 requests x (up to 43 prompt + 40 output) tokens cannot all fit in 400 slots at once.
    small = make_engine(tiny_dir, max_total_tokens=400, max_running_requests=12)
    try:
        results = small.generate(input_ids=batch, sampling_params=GREEDY)
        stats = small.get_stats()
        small.check_invariants()
    finally:
        small.shutdown()
    assert stats["num_retractions"] > 0
    assert [r["output_ids"] for r in results] == expected
    assert sum(r["meta_info"]["num_retractions"] for r in results) == stats["num_retractions"]


def test_hundreds_of_random_requests_all_finish_and_nothing_leaks(
    tiny_dir, make_engine, engine: Engine
) -> None:
    rng = random.Random(7)
    eng = make_engine(tiny_dir, max_total_tokens=3000, max_running_requests=48, chunked_prefill_size=256)
    specs = []
    for i in range(500):
        ids = [rng.randrange(5, 4000) for _ in range(rng.randrange(1, 120))]
        params = {"max_new_tokens": rng.randrange(0, 24), "ignore_eos": rng.random() < 0.5}
        if rng.random() < 0.5:
            params["temperature"] = 0
        else:
            params.update(temperature=rng.uniform(0.3, 1.5), top_k=rng.choice([-1, 5, 50]), seed=i)
        if rng.random() < 0.2:
            params["stop"] = [rng.choice(["e", "th", " a", "\n"])]
        specs.append((f"req-{i}", ids, params, rng.random() < 0.1))

    async def run() -> list[dict]:
        async def one(rid: str, ids: list[int], params: dict, abort: bool) -> dict:
            task = asyncio.ensure_future(eng.async_generate(input_ids=ids, sampling_params=params, rid=rid))
            if abort:
                await asyncio.sleep(rng.uniform(0, 0.05))
                eng.abort(rid)
            return await asyncio.wait_for(task, timeout=300)

        return await asyncio.gather(*(one(*spec) for spec in specs))

    try:
        results = asyncio.run(run())
        stats = eng.get_stats()
        eng.check_invariants()
        assert stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]
        assert stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0
    finally:
        eng.shutdown()
    assert len(results) == 500
    finish_types = {r["meta_info"]["finish_reason"]["type"] for r in results}
    assert finish_types <= {"length", "stop", "abort"}
    for (rid, _ids, params, aborted), result in zip(specs, results, strict=True):
        assert result["meta_info"]["id"] == rid
        reason = result["meta_info"]["finish_reason"]
        if reason["type"] == "abort":
            assert aborted
            continue
        assert len(result["output_ids"]) <= params["max_new_tokens"]
        if reason["type"] == "length":
            assert len(result["output_ids"]) == params["max_new_tokens"]
    # Unaborted greedy requests produce what they produce alone.
    greedy = [
        (ids, p, r) for (_, ids, p, a), r in zip(specs, results, strict=True) if p.get("temperature") == 0
    ]
    for ids, params, result in greedy[:15]:
        if result["meta_info"]["finish_reason"]["type"] != "abort":
            assert (
                engine.generate(input_ids=ids, sampling_params=params)["output_ids"] == result["output_ids"]
            )
