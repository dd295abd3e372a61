"""The overlap schedule (`scheduler/overlap.py`) gives the plain schedule's tokens: greedy and
seeded sampling, penalties, `min_new_tokens`, logprobs, stop strings and tokens, regex / JSON /
grammar constraints with and without jump-forward, chunked prefill, retraction on a small pool,
aborts, LoRA batches and tensor parallelism (tp=2). Every engine here checks its slot accounting
after each step (`debug_invariants`), the pending tokens included."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest

# Long constant keys: jump-forward joins a sampled token with forced text and retokenizes it,
# so the token an overlapped pass was fed may not be the one that stays.
SCHEMA = {
    "type": "object",
    "properties": {
        "customer_identification_number": {"type": "integer", "minimum": 0, "maximum": 9999},
        "preferred_communication_channel": {"type": "string", "enum": ["email", "telephone", "post"]},
        "has_accepted_terms_and_conditions": {"type": "boolean"},
        "shipping_address_first_line": {"type": "string", "maxLength": 24},
    },
    "required": [
        "customer_identification_number",
        "preferred_communication_channel",
        "has_accepted_terms_and_conditions",
        "shipping_address_first_line",
    ],
    "additionalProperties": False,
}
EBNF = 'root ::= "(" expr ")"\nexpr ::= [0-9]+ | [0-9]+ " + " expr'


def prompts(n: int, seed: int, shared_len: int = 12) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(10, 4000) for _ in range(shared_len)]
    return [shared + [rng.randrange(10, 4000) for _ in range(rng.randrange(2, 30))] for _ in range(n)]


@pytest.fixture(scope="module")
def engines(tiny_dir: Path, make_engine):
    plain = make_engine(tiny_dir, overlap_schedule=False)
    overlap = make_engine(tiny_dir, overlap_schedule=True)
    yield plain, overlap
    overlap.shutdown()
    plain.shutdown()


def both(engines, **request) -> tuple[list[dict], list[dict]]:
    plain, overlap = engines
    return plain.generate(**request), overlap.generate(**request)


def test_greedy_tokens_finishes_and_passes_match(engines) -> None:
    batch = prompts(16, seed=1)
    params = [{"temperature": 0, "max_new_tokens": n} for n in (1, 2, 3, 7, 20, 33) * 2 + (40,) * 4]
    plain, overlap = both(engines, input_ids=batch, sampling_params=params)
    assert [r["output_ids"] for r in overlap] == [r["output_ids"] for r in plain]
    assert [r["meta_info"]["finish_reason"] for r in overlap] == [
        r["meta_info"]["finish_reason"] for r in plain
    ]
    assert all(len(r["output_ids"]) <= p["max_new_tokens"] for p, r in zip(params, overlap, strict=True))
    plain_stats, overlap_stats = (engine.get_stats() for engine in engines)
    assert plain_stats["num_overlapped_passes"] == 0
    assert overlap_stats["num_overlapped_passes"] == overlap_stats["num_decode_passes"] > 0
    # On one rank each pass after the first is fed the tokens the pass before sampled on the device.
    assert plain_stats["num_chained_rows"] == 0
    assert 0 < overlap_stats["num_chained_rows"] < overlap_stats["num_decode_seqs"]


def test_sampling_penalties_min_tokens_and_logprobs_match(engines) -> None:
    batch = prompts(8, seed=2)
    params = [
        {"temperature": 0.9, "top_p": 0.9, "seed": 11, "max_new_tokens": 24},
        {"temperature": 1.2, "top_k": 20, "seed": 12, "max_new_tokens": 24, "frequency_penalty": 0.7},
        {"temperature": 0, "max_new_tokens": 24, "repetition_penalty": 1.3, "presence_penalty": 0.5},
        {"temperature": 0, "max_new_tokens": 24, "min_new_tokens": 20},
        {"temperature": 0.7, "seed": 13, "max_new_tokens": 24, "min_p": 0.05},
        {"temperature": 0, "max_new_tokens": 24},
        {"temperature": 0, "max_new_tokens": 5},
        {"temperature": 1.0, "seed": 14, "max_new_tokens": 24},
    ]
    request = {"input_ids": batch, "sampling_params": params, "return_logprob": True, "top_logprobs_num": 3}
    plain, overlap = both(engines, **request)
    for a, b in zip(plain, overlap, strict=True):
        assert b["output_ids"] == a["output_ids"]
        assert b["meta_info"]["output_token_logprobs"] == a["meta_info"]["output_token_logprobs"]
        assert b["meta_info"]["output_top_logprobs"] == a["meta_info"]["output_top_logprobs"]


def test_stop_strings_and_stop_tokens_match(engines) -> None:
    plain_engine = engines[0]
    batch = prompts(6, seed=3)
    free = plain_engine.generate(input_ids=batch, sampling_params={"temperature": 0, "max_new_tokens": 30})
    # Stops taken from the free runs' own outputs, so they are met part-way.
    params = []
    for i, result in enumerate(free):
        ids = result["output_ids"]
        if i % 2 == 0:
            params.append({"temperature": 0, "max_new_tokens": 30, "stop": [result["text"][8:11] or "x"]})
        else:
            params.append(
                {"temperature": 0, "max_new_tokens": 30, "stop_token_ids": [ids[min(9, len(ids) - 1)]]}
            )
    plain, overlap = both(engines, input_ids=batch, sampling_params=params)
    assert [r["text"] for r in overlap] == [r["text"] for r in plain]
    assert [r["output_ids"] for r in overlap] == [r["output_ids"] for r in plain]
    assert sum(r["meta_info"]["finish_reason"]["type"] == "stop" for r in overlap) >= 3


@pytest.mark.parametrize("jump", [True, False])
def test_constrained_outputs_match(tiny_dir: Path, make_engine, engines, jump: bool) -> None:
    pair = engines
    if not jump:
        pair = (
            make_engine(tiny_dir, overlap_schedule=False, disable_jump_forward=True),
            make_engine(tiny_dir, overlap_schedule=True, disable_jump_forward=True),
        )
    try:
        batch = prompts(9, seed=4)
        json_params = [{"temperature": 0, "max_new_tokens": 160, "json_schema": json.dumps(SCHEMA)}] * 4
        params = [
            *json_params,
            {"temperature": 0, "max_new_tokens": 40, "regex": r"The answer is (A|B|C|D)\."},
            {"temperature": 0, "max_new_tokens": 40, "ebnf": EBNF},
            {"temperature": 0.8, "seed": 5, "max_new_tokens": 160, "json_schema": json.dumps(SCHEMA)},
            {"temperature": 0, "max_new_tokens": 30},  # unconstrained beside them
            {"temperature": 0, "max_new_tokens": 40, "regex": r"[a-z]{1,8}@[a-z]{1,8}\.(com|org)"},
        ]
        plain, overlap = both(pair, input_ids=batch, sampling_params=params)
        assert [r["output_ids"] for r in overlap] == [r["output_ids"] for r in plain]
        for i in (0, 1, 2, 3, 6):
            jsonschema.validate(json.loads(overlap[i]["text"]), SCHEMA)
    finally:
        if pair is not engines:
            for engine in pair:
                engine.shutdown()


def test_a_lone_request_with_forced_runs_matches(engines) -> None:
    # Alone, its pass after each forced run's lead token samples no row at all.
    params = {"temperature": 0, "max_new_tokens": 160, "json_schema": json.dumps(SCHEMA)}
    for prompt in prompts(2, seed=10):
        plain, overlap = both(engines, input_ids=prompt, sampling_params=params)
        assert overlap["output_ids"] == plain["output_ids"]
        jsonschema.validate(json.loads(overlap["text"]), SCHEMA)


def test_chunked_prefill_beside_decoding_and_retraction_match(tiny_dir: Path, make_engine, engines) -> None:
    batch = prompts(12, seed=6, shared_len=24)
    batch += [[(7 * i + 3) % 3900 + 10 for i in range(180)]]  # a long prompt, prefilled in chunks
    params = {"temperature": 0, "max_new_tokens": 40, "ignore_eos": True}
    expected = [r["output_ids"] for r in engines[0].generate(input_ids=batch, sampling_params=params)]
    small = make_engine(
        tiny_dir,
        overlap_schedule=True,
        max_total_tokens=500,
        max_running_requests=12,
        chunked_prefill_size=48,
    )
    try:
        results = small.generate(input_ids=batch, sampling_params=params)
        stats = small.get_stats()
        small.check_invariants()
    finally:
        small.shutdown()
    assert stats["num_retractions"] > 0
    assert [r["output_ids"] for r in results] == expected


def test_aborts_mid_decode_lose_nothing(engines) -> None:
    _, overlap = engines
    rng = random.Random(8)
    batch = prompts(40, seed=8)

    async def run() -> list[dict]:
        async def one(i: int) -> dict:
            params = {"temperature": 0, "max_new_tokens": rng.randrange(1, 40), "ignore_eos": True}
            task = asyncio.ensure_future(
                overlap.async_generate(input_ids=batch[i], sampling_params=params, rid=f"ov-{i}")
            )
            if i % 3 == 0:
                await asyncio.sleep(rng.uniform(0, 0.03))
                overlap.abort(f"ov-{i}")
            return await asyncio.wait_for(task, timeout=120)

        return await asyncio.gather(*(one(i) for i in range(len(batch))))

    results = asyncio.run(run())
    assert len(results) == len(batch)
    for i, result in enumerate(results):
        kind = result["meta_info"]["finish_reason"]["type"]
        assert kind in ("length", "abort"), result["meta_info"]["finish_reason"]
        if i % 3:
            assert kind == "length"
    overlap.check_invariants()
    stats = overlap.get_stats()
    assert stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0


def test_tp2_workers_overlap_matches_plain(tiny_dir: Path, make_engine) -> None:
    batch = prompts(6, seed=9)
    params = [
        {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True},
        {"temperature": 0, "max_new_tokens": 40, "regex": r"The answer is (A|B|C|D)\."},
        {"temperature": 0.9, "seed": 3, "max_new_tokens": 16},
    ] * 2
    outputs = {}
    for overlap in (False, True):
        tp2 = make_engine(tiny_dir, tp_size=2, overlap_schedule=overlap)
        try:
            outputs[overlap] = tp2.generate(input_ids=batch, sampling_params=params, return_logprob=True)
            stats = tp2.get_stats()
            assert (stats["num_overlapped_passes"] > 0) == overlap
            assert stats["num_chained_rows"] == 0  # the other rank could not read device ids
        finally:
            tp2.shutdown()
    plain, overlapped = outputs[False], outputs[True]
    assert [r["output_ids"] for r in overlapped] == [r["output_ids"] for r in plain]
    # Worker engines may form their first batches at other moments (the requests cross a
    # socket), and a float32 sum in another order differs in its last bits: logprobs agree to
    # float32 rounding of a few hundred terms, not a constant tuned on one CPU.
    eps = float(np.finfo(np.float32).eps)
    for a, b in zip(plain, overlapped, strict=True):
        pairs = zip(
            a["meta_info"]["output_token_logprobs"], b["meta_info"]["output_token_logprobs"], strict=True
        )
        for (lp_a, id_a, _), (lp_b, id_b, _) in pairs:
            assert id_a == id_b and math.isclose(lp_a, lp_b, rel_tol=256 * eps, abs_tol=256 * eps)


@pytest.mark.gpu
def test_cuda_rows_fed_on_the_device_give_the_plain_tokens(tiny_dir: Path, make_engine) -> None:
    # Length limits only: no row is dropped, so both schedules run batches of the same rows.
    pair = tuple(make_engine(tiny_dir, device="cuda", overlap_schedule=flag) for flag in (False, True))
    try:
        params = [{"temperature": 0, "max_new_tokens": n, "ignore_eos": True} for n in (3, 17, 40, 64) * 3]
        plain, overlap = both(pair, input_ids=prompts(12, seed=11), sampling_params=params)
        assert [r["output_ids"] for r in overlap] == [r["output_ids"] for r in plain]
        stats = pair[1].get_stats()
        assert stats["num_overlapped_passes"] == stats["num_decode_passes"] > 0
        assert stats["num_chained_rows"] > 0
    finally:
        for engine in pair:
            engine.shutdown()
