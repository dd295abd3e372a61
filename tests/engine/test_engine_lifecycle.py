"""Regression tests for engine fixes found while building the server: abandoned streams and
cancelled waits abort their requests, seeded `n` samples differ, and bad input that used to
crash (huge ids, lone surrogates) or pass (an unparsable json_schema) is a named 400-style error."""

from __future__ import annotations

import asyncio
import time

import pytest

from sglr.engine.engine import Engine
from sglr.errors import InvalidRequestError
from sglr.sampling_params import SamplingParams

LONG = {"max_new_tokens": 3000, "ignore_eos": True}


def _wait_idle(engine: Engine, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        stats = engine.get_stats()
        if stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0:
            engine.check_invariants()
            return stats
        assert time.monotonic() < deadline, stats
        time.sleep(0.01)


def test_closing_a_sync_stream_early_aborts_the_request(engine: Engine) -> None:
    before = engine.get_stats()["num_aborted"]
    stream = engine.generate("count with me", LONG, stream=True)
    next(stream)
    stream.close()
    stats = _wait_idle(engine)
    assert stats["num_aborted"] == before + 1
    assert stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]


def test_closing_an_async_stream_early_aborts_every_unfinished_sequence(engine: Engine) -> None:
    before = engine.get_stats()["num_aborted"]

    async def run() -> None:
        stream = await engine.async_generate(
            ["a", "b", "c"], [LONG, LONG, {"max_new_tokens": 1}], stream=True
        )
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 4:
                break
        await stream.aclose()

    asyncio.run(run())
    stats = _wait_idle(engine)
    assert stats["num_aborted"] == before + 2  # the one-token sequence had finished


def test_cancelling_a_non_stream_wait_aborts_the_request(engine: Engine) -> None:
    before = engine.get_stats()["num_aborted"]

    async def run() -> None:
        task = asyncio.ensure_future(engine.async_generate("count with me", LONG))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert _wait_idle(engine)["num_aborted"] == before + 1


def test_seeded_n_samples_differ_and_sample_zero_matches_n_1(engine: Engine) -> None:
    params = {"temperature": 1.0, "max_new_tokens": 8, "ignore_eos": True, "seed": 7}
    samples = engine.generate("Once upon", {**params, "n": 4})
    assert len({tuple(r["output_ids"]) for r in samples}) == 4
    assert samples[0]["output_ids"] == engine.generate("Once upon", params)["output_ids"]
    assert engine.generate("Once upon", {**params, "n": 4})[3]["output_ids"] == samples[3]["output_ids"]


def test_sglang_clients_empty_stop_regex_and_ebnf_are_accepted() -> None:
    params = SamplingParams.from_dict({"stop_regex": [], "ebnf": None, "regex": None, "json_schema": None})
    assert params.stop_regex == () and params.ebnf is None
    with pytest.raises(InvalidRequestError, match="invalid stop_regex") as excinfo:
        SamplingParams.from_dict({"stop_regex": ["(a"]})
    assert excinfo.value.param == "sampling_params.stop_regex"
    assert SamplingParams.from_dict({"ebnf": "root ::= 'a'"}).has_constraint
    with pytest.raises(InvalidRequestError, match="Only one of"):
        SamplingParams.from_dict({"ebnf": "root ::= 'a'", "json_schema": "{}"})


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"min_new_tokens": 3, "max_new_tokens": 1}, "min_new_tokens"),
        ({"n": 0}, "n"),
        ({"json_schema": "{oops"}, "json_schema"),
        ({"regex": "a", "json_schema": "{}"}, "regex"),
    ],
)
def test_range_errors_name_their_parameter(raw: dict, param: str) -> None:
    with pytest.raises(InvalidRequestError) as excinfo:
        SamplingParams.from_dict(raw)
    assert excinfo.value.param == f"sampling_params.{param}"


def test_out_of_range_ids_and_lone_surrogates_are_request_errors(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError, match="input_ids must be in") as excinfo:
        engine.generate(input_ids=[1, 10**20], sampling_params={"max_new_tokens": 1})
    assert excinfo.value.param == "input_ids"
    with pytest.raises(InvalidRequestError, match="lone UTF-16 surrogate") as excinfo:
        engine.generate("a\ud800b", {"max_new_tokens": 1})
    assert excinfo.value.param == "text"
    with pytest.raises(InvalidRequestError) as excinfo:
        engine.generate(input_ids=[5] * 5000, sampling_params={"max_new_tokens": 1})
    assert excinfo.value.param == "input_ids"
    with pytest.raises(InvalidRequestError) as excinfo:
        engine.generate(input_ids=[5] * 4000, sampling_params={"max_new_tokens": 500})
    assert excinfo.value.param == "sampling_params.max_new_tokens"


def test_a_request_that_can_never_fit_is_aborted_as_an_invalid_request(tiny_dir, make_engine) -> None:
    small = make_engine(tiny_dir, max_total_tokens=64)
    try:
        result = small.generate(
            input_ids=[5] * 40, sampling_params={"max_new_tokens": 60, "ignore_eos": True}
        )
    finally:
        small.shutdown()
    reason = result["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and reason["err_type"] == "invalid_request"
    assert "more KV cache than the engine has" in reason["message"]


def test_a_chunked_prompt_that_can_never_fit_is_aborted_not_left_waiting(tiny_dir, make_engine) -> None:
    """Its chunks hold the KV its last chunk and output would need; nothing else can free it."""
    small = make_engine(tiny_dir, max_total_tokens=256, chunked_prefill_size=64)
    try:
        result = small.generate(
            input_ids=[5] * 200, sampling_params={"max_new_tokens": 200, "ignore_eos": True}
        )
        small.check_invariants()
    finally:
        small.shutdown()
    reason = result["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and reason["err_type"] == "invalid_request"
    assert "more KV cache than the engine has (256 tokens)" in reason["message"]


def test_encode_can_leave_special_tokens_out(engine: Engine) -> None:
    tokenizer = engine.tokenizer
    text = "<|im_start|>user\nhi<|im_end|>"
    assert tokenizer.encode(text, add_special_tokens=False) == tokenizer.hf.encode(
        text, add_special_tokens=False
    )


def test_a_slow_async_reader_gets_merged_chunks_that_add_up(engine: Engine) -> None:
    params = {"temperature": 0, "max_new_tokens": 40, "ignore_eos": True}
    expected = engine.generate("merge me", params, return_logprob=True, top_logprobs_num=2)

    async def run() -> list[dict]:
        stream = await engine.async_generate(
            "merge me", params, return_logprob=True, top_logprobs_num=2, stream=True
        )
        time.sleep(0.5)  # blocks the event loop: the engine's events pile up meanwhile
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    assert len(chunks) < 40
    assert "".join(c["text"] for c in chunks) == expected["text"]
    assert [t for c in chunks for t in c["output_ids"]] == expected["output_ids"]
    logprobs = [e for c in chunks for e in c["meta_info"]["output_token_logprobs"]]
    tops = [t for c in chunks for t in c["meta_info"]["output_top_logprobs"]]
    # Same tokens; logprobs within float noise (the prompt is a cache hit the second time).
    assert [e[1] for e in logprobs] == [e[1] for e in expected["meta_info"]["output_token_logprobs"]]
    assert [e[0] for e in logprobs] == pytest.approx(
        [e[0] for e in expected["meta_info"]["output_token_logprobs"]], abs=1e-4
    )
    assert [[t[1] for t in top] for top in tops] == [
        [t[1] for t in top] for top in expected["meta_info"]["output_top_logprobs"]
    ]
    assert chunks[-1]["meta_info"]["completion_tokens"] == 40
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 40}


def test_shutdown_frees_an_owned_model_and_leaves_a_given_runner_usable(tiny_dir, make_engine) -> None:
    """A process that starts engines one after another (a benchmark, a test suite) must get the
    first engine's device memory back at its shutdown, not at garbage collection."""
    params = {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True}
    owned = make_engine(tiny_dir, max_total_tokens=512)
    expected = owned.generate(input_ids=[5, 6, 7], sampling_params=params)["output_ids"]
    runner = owned.runner
    owned.shutdown()
    assert runner.model is None and runner.kv_cache is None
    from sglr.model.runner import ModelRunner, RunnerConfig

    own_runner = ModelRunner(RunnerConfig(tiny_dir, device="cpu", kv_num_tokens=512, max_num_reqs=8))
    given = Engine.from_runner(own_runner, max_running_requests=4)
    given_runner = given.runner
    given.shutdown()
    assert given_runner.model is not None and given_runner.kv_cache is not None
    again = Engine.from_runner(given_runner, max_running_requests=4)
    try:
        assert again.generate(input_ids=[5, 6, 7], sampling_params=params)["output_ids"] == expected
    finally:
        again.shutdown()
