"""`stop_regex` (SGLang's sampling field): validation, matching across tokens, trimming, and the
batch-size counters the language's parallelism checks rely on."""

from __future__ import annotations

import re

import pytest

from sglr.engine.engine import Engine
from sglr.engine.stop_strings import StopStringMatcher
from sglr.errors import InvalidRequestError
from sglr.sampling_params import SamplingParams

GREEDY = {"temperature": 0, "max_new_tokens": 16, "ignore_eos": True}
PROMPT = "The quick brown fox jumps over"


def test_stop_regex_is_normalised_and_validated() -> None:
    assert SamplingParams(stop_regex=r"\d").stop_regex == (r"\d",)
    assert SamplingParams.from_dict({"stop_regex": [r"a+", "b"]}).stop_regex == ("a+", "b")
    assert SamplingParams.from_dict({"stop_regex": None}).stop_regex == ()
    with pytest.raises(InvalidRequestError, match="invalid stop_regex"):
        SamplingParams(stop_regex="(")
    with pytest.raises(InvalidRequestError, match="256-byte limit"):
        SamplingParams(stop_regex="a" * 257)
    with pytest.raises(InvalidRequestError, match="at most 32 stop_regex"):
        SamplingParams(stop_regex=["a"] * 33)
    with pytest.raises(InvalidRequestError, match="expected a string or a list of strings"):
        SamplingParams.from_dict({"stop_regex": 3})


def test_matcher_finds_the_earliest_non_empty_match() -> None:
    matcher = StopStringMatcher(["zz"], [r"x*", r"[0-9]+"])
    assert not matcher.is_empty
    assert matcher.find("abc", 3) is None
    match = matcher.find("ab12cz", 1)
    assert (match.stop, match.start, match.end) == ("12", 2, 4)
    match = matcher.find("azzx9", 4)  # a stop string before a regex match wins
    assert (match.stop, match.start) == ("zz", 1)


def test_stop_regex_ends_generation_and_trims_the_match(engine: Engine) -> None:
    full = engine.generate(PROMPT, GREEDY)["text"]
    pattern = re.escape(full[4:6])  # likely spans a token boundary
    start = re.search(pattern, full).start()
    out = engine.generate(PROMPT, {**GREEDY, "stop_regex": [pattern]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": full[start : start + 2]}
    assert out["text"] == full[:start]
    kept = engine.generate(PROMPT, {**GREEDY, "stop_regex": pattern, "no_stop_trim": True})
    assert kept["text"] == full[: start + 2]
    streamed = "".join(
        c["text"] for c in engine.generate(PROMPT, {**GREEDY, "stop_regex": [pattern]}, stream=True)
    )
    assert streamed == full[:start]
    engine.check_invariants()


def test_stats_count_decode_batch_sizes(engine: Engine) -> None:
    before = engine.get_stats()
    engine.generate([PROMPT, PROMPT + " the", PROMPT + " a"], {**GREEDY, "max_new_tokens": 5})
    after = engine.get_stats()
    num_passes = after["num_decode_passes"] - before["num_decode_passes"]
    num_seqs = after["num_decode_seqs"] - before["num_decode_seqs"]
    assert num_seqs == 3 * 4  # the first token of each comes from its prefill
    assert after["max_decode_batch_size"] >= 3 and num_passes >= 4
    assert after["num_extend_seqs"] - before["num_extend_seqs"] >= 3
    assert after["mean_decode_batch_size"] == after["num_decode_seqs"] / after["num_decode_passes"]
