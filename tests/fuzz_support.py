"""Shared pieces of the HTTP fuzz tests (`tests/server/test_fuzz_*.py`, `tests/router/test_fuzz_router.py`):
example budgets, JSON values of every kind (raw number spellings included), bodies encoded as
bytes, and the checks every response must pass.

Budgets: each fuzz test runs `examples(n)` examples, `n` times `SGLR_FUZZ_SCALE` (default 1).
At scale 1 the examples are derandomized (the same inputs on every run, so CI is reproducible);
at a larger scale they are random, for long runs that look for new failures.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sse_client import parse_sse

FUZZ_SCALE = int(os.environ.get("SGLR_FUZZ_SCALE", "1"))


def fuzz_settings(num_examples: int) -> settings:
    return settings(
        max_examples=num_examples * FUZZ_SCALE,
        deadline=None,
        derandomize=FUZZ_SCALE == 1,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


class Raw:
    """A JSON number (or literal) written exactly as given: `1e400`, a 400-digit integer, `-0`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r})"


def encode(value: Any) -> bytes:
    """`value` as JSON bytes (ASCII: lone surrogates go as `\\udXXX` escapes), `Raw` verbatim."""
    raws: list[str] = []

    def default(obj: Any) -> str:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\x00raw{len(raws) - 1}\x00"
        raise TypeError(f"not JSON: {obj!r}")

    text = json.dumps(value, default=default)
    for k, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{k}\x00"), raw, 1)
    return text.encode("ascii")


# -- values ---------------------------------------------------------------------------------

LONE_SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udbff\udbff"])
# Numbers past every range a field has: floats that overflow to infinity when read, integers too
# large for a float, u64 / i64 edges.
HUGE_NUMBERS = st.sampled_from(
    [
        Raw("1e400"),
        Raw("-1e400"),
        Raw("1" + "0" * 400),
        Raw("-" + "9" * 400),
        Raw("1e-400"),
        2**63,
        2**64,
        -(2**63) - 1,
        10**30,
        1.7976931348623157e308,
        -0.0,
    ]
)
TEXT = st.text(st.characters(codec="utf-8"), max_size=24)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    LONE_SURROGATES,
    HUGE_NUMBERS,
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def wrong_types(*keep: str) -> st.SearchStrategy[Any]:
    """Values of every JSON type but those named in `keep` ("null", "bool", "int", "float",
    "str", "list", "dict"): a field that takes only those must refuse them all."""
    kinds = {
        "null": st.none(),
        "bool": st.booleans(),
        "int": st.integers(-5, 5),
        "float": st.sampled_from([0.5, -1.5, 3.25]),
        "str": st.sampled_from(["", "x", "1", "true", "null"]),
        "list": st.lists(st.integers(0, 3), max_size=2),
        "dict": st.dictionaries(st.sampled_from(["a", "1"]), st.integers(0, 3), max_size=1),
    }
    return st.one_of(*(strategy for kind, strategy in kinds.items() if kind not in keep))


def nested(depth: int, kind: str = "list") -> Raw:
    """A JSON value nested `depth` levels deep (`[[[...]]]` or `{"a":{"a":...}}`)."""
    if kind == "list":
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


# -- responses ------------------------------------------------------------------------------


def check_response(response: httpx.Response) -> None:
    """Never a 5xx; every error is the JSON error object without a stack trace; a stream never
    carries an error event of a 5xx."""
    text = response.text
    assert response.status_code < 500, f"{response.status_code}: {text[:500]}"
    assert "Traceback" not in text and 'File "' not in text, text[:500]
    if response.status_code >= 400:
        error = response.json()["error"]
        # OpenAI names one error by its own code (an unknown model); the others' code is the status.
        code = (
            "model_not_found"
            if error.get("code") == "model_not_found" and response.status_code == 404
            else None
        )
        assert error["code"] == (code or response.status_code) and isinstance(error["message"], str), error
    elif response.headers.get("content-type", "").startswith("text/event-stream"):
        for event in parse_sse(text):
            if isinstance(event, dict) and "error" in event:
                assert event["error"]["code"] < 500, event


def error_param(response: httpx.Response) -> str | None:
    return response.json()["error"]["param"]


def names_field(param: str | None, field: str) -> bool:
    """`param` is `field` or a part of it (`messages[0].content` names `messages`)."""
    return param is not None and (param == field or param.startswith((f"{field}.", f"{field}[")))


def assert_refused_naming(response: httpx.Response, field: str) -> None:
    check_response(response)
    assert 400 <= response.status_code < 500, f"accepted a bad {field}: {response.text[:300]}"
    param = error_param(response)
    assert names_field(param, field), f"the error names {param!r}, not {field!r}: {response.text[:300]}"
