"""Tensor parallelism on CPU (gloo, 2 ranks, one worker process each), on tiny Llama and Qwen2
checkpoints with a single KV head (fewer KV heads than ranks: each rank holds a copy): greedy
tokens identical to tp=1 and to `transformers`, alone and batched, with cache hits, chunked
prefill, retraction and constrained decoding; logprobs within tolerance; a rank that dies ends
every request with an error."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from sglr.errors import EngineClosedError
from sglr.testing.tiny import tiny_model_path

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
PROMPTS = ["The quick brown fox jumps over", "def main():\n    return", "Once upon a time there was"]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model_dir(request) -> Path:
    return tiny_model_path(request.param, num_kv_heads=1)


@pytest.fixture(scope="module")
def engines(model_dir: Path, make_engine):
    tp1 = make_engine(model_dir)
    tp2 = make_engine(model_dir, tp_size=2)
    yield tp1, tp2
    tp2.shutdown()
    tp1.shutdown()


def ids(results: list[dict]) -> list[list[int]]:
    return [r["output_ids"] for r in results]


def test_tp2_greedy_tokens_equal_tp1_and_transformers(engines, model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    tp1, tp2 = engines
    hf = AutoModelForCausalLM.from_pretrained(str(model_dir), torch_dtype=torch.float32).eval()
    for prompt in PROMPTS:
        prompt_ids = tp2.tokenizer.encode(prompt)
        with torch.no_grad():
            ref = hf.generate(
                torch.tensor([prompt_ids]), max_new_tokens=12, min_new_tokens=12, do_sample=False
            )
        alone = tp2.generate(prompt, GREEDY)["output_ids"]
        assert alone == ref[0, len(prompt_ids) :].tolist() == tp1.generate(prompt, GREEDY)["output_ids"]
    assert ids(tp2.generate(PROMPTS, GREEDY)) == ids(tp1.generate(PROMPTS, GREEDY))  # batched


def test_tp2_cache_hits_give_the_same_tokens(engines) -> None:
    tp1, tp2 = engines
    first = ids(tp2.generate(PROMPTS, GREEDY))
    again = tp2.generate(PROMPTS, GREEDY)
    assert all(r["meta_info"]["cached_tokens"] > 0 for r in again)
    assert ids(again) == first == ids(tp1.generate(PROMPTS, GREEDY))
    tp2.check_invariants()


def test_tp2_logprobs_are_within_tolerance_of_tp1(engines) -> None:
    tp1, tp2 = engines
    kwargs = {"return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 3}
    one = tp1.generate(PROMPTS[1], GREEDY, **kwargs)["meta_info"]
    two = tp2.generate(PROMPTS[1], GREEDY, **kwargs)["meta_info"]
    for key in ("input_token_logprobs", "output_token_logprobs"):
        assert [e[1] for e in two[key]] == [e[1] for e in one[key]]
        for a, b in zip(two[key], one[key], strict=True):
            assert (a[0] is None and b[0] is None) or abs(a[0] - b[0]) < 1e-4
    assert [[e[1] for e in top] for top in two["output_top_logprobs"]] == [
        [e[1] for e in top] for top in one["output_top_logprobs"]
    ]


def test_tp2_constrained_decoding_equals_tp1(engines) -> None:
    tp1, tp2 = engines
    params = {"temperature": 0, "max_new_tokens": 8, "regex": r"[0-9]{2}-[a-z]{3}"}
    two = tp2.generate(PROMPTS, params)
    assert ids(two) == ids(tp1.generate(PROMPTS, params))
    assert all(re.fullmatch(r"[0-9]{2}-[a-z]{3}", r["text"]) for r in two)


def test_tp2_chunked_prefill_and_retraction_give_the_same_tokens(
    model_dir: Path, make_engine, engines
) -> None:
    tp1, _ = engines
    rng = random.Random(1)
    shared = [rng.randrange(10, 4000) for _ in range(24)]
    batch = [shared + [rng.randrange(10, 4000) for _ in range(rng.randrange(4, 20))] for _ in range(12)]
    params = dict(GREEDY, max_new_tokens=40)
    expected = ids(tp1.generate(input_ids=batch, sampling_params=params))
    # Prompt chunks of 16 tokens per step, and 12 x (up to 43 + 40) tokens for 400 KV slots.
    small = make_engine(
        model_dir, tp_size=2, chunked_prefill_size=16, max_total_tokens=400, max_running_requests=12
    )
    try:
        assert ids(small.generate(input_ids=batch, sampling_params=params)) == expected
        stats = small.get_stats()
        assert stats["num_extend_passes"] > 12 and stats["num_retractions"] > 0, stats
        small.check_invariants()
    finally:
        small.shutdown()


def test_a_rank_killed_mid_load_ends_every_request_with_an_error(model_dir: Path, make_engine) -> None:
    engine = make_engine(model_dir, tp_size=2)
    outcome: list = []

    def load() -> None:
        try:
            outcome.append(engine.generate(PROMPTS * 4, {"max_new_tokens": 3000, "ignore_eos": True}))
        except Exception as exc:
            outcome.append(exc)

    caller = threading.Thread(target=load)
    try:
        caller.start()
        time.sleep(1.0)
        os.kill(engine.worker_pids[1], signal.SIGKILL)
        caller.join(timeout=60)
        assert not caller.is_alive(), "requests hung after a rank died"
        (results,) = outcome
        reasons = [r["meta_info"]["finish_reason"] for r in results]
        assert all(r["type"] == "abort" and isinstance(r.error, EngineClosedError) for r in reasons), reasons
        assert not engine.is_alive
    finally:
        engine.shutdown()
