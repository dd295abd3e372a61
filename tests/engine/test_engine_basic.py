"""Engine end to end on the tiny model: API shape, cache equivalence, batching, chunking."""

from __future__ import annotations

import asyncio

import pytest

from sglr.engine.engine import Engine
from sglr.errors import InvalidRequestError

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
PROMPTS = [
    "The quick brown fox jumps over",
    "def main():\n    return",
    "Return the value of the attribute",
    "The quick brown fox jumps over the lazy dog and then",
]


def texts(results: list[dict]) -> list[list[int]]:
    return [r["output_ids"] for r in results]


def test_result_shape_matches_the_native_api(engine: Engine) -> None:
    out = engine.generate(PROMPTS[0], GREEDY)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["completion_tokens"] == len(out["output_ids"]) == 12
    assert meta["prompt_tokens"] == len(engine.tokenizer.encode(PROMPTS[0]))
    assert isinstance(meta["id"], str) and meta["e2e_latency"] > 0
    engine.check_invariants()


def test_cache_on_and_off_give_identical_greedy_tokens(engine: Engine, engine_no_cache: Engine) -> None:
    with_cache = [engine.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    # Again, now hitting the cache (the prompts are cached after the first round).
    again = engine.generate(PROMPTS, GREEDY)
    assert [r["meta_info"]["cached_tokens"] > 0 for r in again] == [True] * len(PROMPTS)
    without = [engine_no_cache.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    assert texts(again) == with_cache == without
    assert all(r["meta_info"]["cached_tokens"] == 0 for r in engine_no_cache.generate(PROMPTS, GREEDY))


def test_batched_equals_one_by_one(engine: Engine) -> None:
    engine.flush_cache()
    alone = [engine.generate(p, GREEDY)["output_ids"] for p in PROMPTS]
    engine.flush_cache()
    assert texts(engine.generate(PROMPTS, GREEDY)) == alone


def test_chunked_prefill_gives_the_same_tokens(tiny_dir, make_engine, engine: Engine) -> None:
    long_prompt = " ".join(PROMPTS * 6)
    expected = engine.generate(long_prompt, GREEDY)["output_ids"]
    for chunk in (7, 32):
        eng = make_engine(tiny_dir, chunked_prefill_size=chunk, disable_radix_cache=chunk == 7)
        try:
            assert eng.generate(long_prompt, GREEDY)["output_ids"] == expected
            assert eng.get_stats()["num_extend_passes"] > 1
        finally:
            eng.shutdown()


def test_max_new_tokens_zero_caches_the_prompt(engine: Engine) -> None:
    engine.flush_cache()
    prompt = "A prompt that is only prefilled and cached for later use"
    first = engine.generate(prompt, {"max_new_tokens": 0})
    assert first["text"] == "" and first["output_ids"] == []
    assert first["meta_info"]["finish_reason"] == {"type": "length", "length": 0}
    second = engine.generate(prompt, GREEDY)
    assert second["meta_info"]["cached_tokens"] == first["meta_info"]["prompt_tokens"] - 1


def test_parallel_samples_share_the_prompt(engine: Engine) -> None:
    engine.flush_cache()
    prompt = "Several samples of one long prompt share its prefill " * 4
    outs = engine.generate(prompt, {"n": 4, "temperature": 1.0, "max_new_tokens": 6, "seed": 1})
    assert isinstance(outs, list) and len(outs) == 4
    cached = sorted(o["meta_info"]["cached_tokens"] for o in outs)
    prompt_len = outs[0]["meta_info"]["prompt_tokens"]
    assert cached[0] == 0 and all(c >= prompt_len - 1 for c in cached[1:])


def test_stop_string_spanning_tokens_is_trimmed_and_reported(engine: Engine) -> None:
    full = engine.generate(PROMPTS[1], GREEDY)["text"]
    assert len(full) > 6
    stop = full[3:6]  # a piece of the greedy text, likely spanning a token boundary
    out = engine.generate(PROMPTS[1], {**GREEDY, "stop": [stop]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert out["text"] == full[: full.index(stop)]
    kept = engine.generate(PROMPTS[1], {**GREEDY, "stop": [stop], "no_stop_trim": True})
    assert kept["text"] == full[: full.index(stop) + len(stop)]


def test_stop_token_ids_end_generation(engine: Engine) -> None:
    ids = engine.generate(PROMPTS[2], GREEDY)["output_ids"]
    out = engine.generate(PROMPTS[2], {**GREEDY, "stop_token_ids": [ids[4]]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": ids[4]}
    assert out["output_ids"] == ids[: ids.index(ids[4]) + 1]


def test_streaming_deltas_add_up_to_the_result(engine: Engine) -> None:
    expected = engine.generate(PROMPTS[3], GREEDY)
    chunks = list(engine.generate(PROMPTS[3], GREEDY, stream=True))
    assert "".join(c["text"] for c in chunks) == expected["text"]
    assert [t for c in chunks for t in c["output_ids"]] == expected["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_async_generate_and_async_stream(engine: Engine) -> None:
    async def run() -> tuple[dict, list[dict]]:
        out = await engine.async_generate(PROMPTS[0], GREEDY)
        stream = await engine.async_generate(PROMPTS, GREEDY, stream=True)
        return out, [c async for c in stream]

    out, chunks = asyncio.run(run())
    assert out["output_ids"] == engine.generate(PROMPTS[0], GREEDY)["output_ids"]
    by_index: dict[int, list[int]] = {}
    for chunk in chunks:
        by_index.setdefault(chunk["index"], []).extend(chunk["output_ids"])
    assert [by_index[i] for i in range(len(PROMPTS))] == texts(engine.generate(PROMPTS, GREEDY))


def test_input_ids_and_seeded_sampling(engine: Engine) -> None:
    ids = engine.tokenizer.encode(PROMPTS[0])
    params = {"temperature": 0.9, "top_p": 0.9, "max_new_tokens": 10, "seed": 42, "ignore_eos": True}
    a = engine.generate(input_ids=ids, sampling_params=params)
    b = engine.generate(PROMPTS[0], params)
    assert a["output_ids"] == b["output_ids"]


def test_bad_input_is_rejected_before_running(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError, match="top_p"):
        engine.generate("x", {"top_p": 2})
    with pytest.raises(InvalidRequestError, match="context length"):
        engine.generate(input_ids=[5] * 5000, sampling_params={"max_new_tokens": 1})
    with pytest.raises(InvalidRequestError, match="input_ids must be in"):
        engine.generate(input_ids=[10**7], sampling_params={"max_new_tokens": 1})
    with pytest.raises(InvalidRequestError, match="Either text"):
        engine.generate()
    with pytest.raises(InvalidRequestError, match="Duplicate"):
        engine.generate(["a", "b"], GREEDY, rid=["x", "x"])
    engine.check_invariants()
