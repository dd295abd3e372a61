"""SamplingParams: SGLang-compatible defaults, normalisation and validation messages."""

from __future__ import annotations

import pytest

from sglr.errors import InvalidRequestError
from sglr.sampling_params import TOP_K_ALL, SamplingParams


def test_defaults_match_the_native_api() -> None:
    params = SamplingParams()
    assert (params.max_new_tokens, params.temperature, params.top_p, params.top_k) == (
        128,
        1.0,
        1.0,
        TOP_K_ALL,
    )
    assert not params.is_greedy and not params.has_constraint


def test_normalisation() -> None:
    assert SamplingParams(temperature=0).is_greedy
    assert SamplingParams(temperature=0.0).temperature == 1.0
    assert SamplingParams(top_k=-1).top_k == TOP_K_ALL
    assert SamplingParams(stop="x").stop == ("x",)
    assert SamplingParams(regex="").regex is None
    assert SamplingParams.from_dict({"temperature": None, "max_new_tokens": None}).max_new_tokens is None
    assert SamplingParams.from_dict({"sampling_seed": 7}).seed == 7


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"temperature": -1}, "temperature must be a non-negative finite number, got -1.0."),
        ({"temperature": float("inf")}, "temperature must be a non-negative finite number"),
        ({"top_p": 0}, "top_p must be in (0, 1], got 0.0."),
        ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5."),
        ({"top_k": 0}, "top_k must be -1 (disable) or at least 1, got 0."),
        ({"frequency_penalty": 3}, "frequency_penalty must be in [-2, 2], got 3.0."),
        ({"presence_penalty": -3}, "presence_penalty must be in [-2, 2], got -3.0."),
        ({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0.0."),
        ({"max_new_tokens": -1}, "max_new_tokens must be at least 0, got -1."),
        (
            {"min_new_tokens": 5, "max_new_tokens": 2},
            "min_new_tokens must be in [0, max_new_tokens(2)], got 5.",
        ),
        (
            {"regex": "a", "json_schema": "{}"},
            "Only one of json_schema, regex, ebnf, or structural_tag can be set.",
        ),
        ({"stop": ["x"] * 33}, "at most 32 stop strings are allowed, got 33"),
        ({"bogus": 1}, "unknown field `bogus`"),
        ({"top_p": "high"}, "invalid type for sampling_params.top_p: expected a number, got str"),
        ({"max_new_tokens": True}, "expected an integer, got bool"),
        ({"stop": 3}, "expected a string or a list of strings"),
        ({"n": 0}, "n must be at least 1, got 0."),
    ],
)
def test_bad_values_raise_invalid_request_with_sglang_wording(raw: dict, message: str) -> None:
    with pytest.raises(InvalidRequestError) as excinfo:
        SamplingParams.from_dict(raw)
    assert message in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_unknown_field_names_the_parameter() -> None:
    with pytest.raises(InvalidRequestError) as excinfo:
        SamplingParams.from_dict({"temprature": 0.5})
    assert excinfo.value.param == "sampling_params.temprature"


def test_vocab_checks() -> None:
    with pytest.raises(InvalidRequestError, match=r"logit_bias must has keys in \[0, 9\], got 10."):
        SamplingParams.from_dict({"logit_bias": {"10": 1.0}}).verify_vocab(10)
    SamplingParams.from_dict({"logit_bias": {"3": -100}}).verify_vocab(10)
