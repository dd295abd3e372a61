"""Fuzzed requests on `sglr-server`'s routes besides generation: the probes and info routes
with any query string and method, `/v1/models/{model}` with any path, `/flush_cache?timeout=`,
and the bodies of `/abort_request`, `/concate_and_append_request`, `/tokenize` and `/detokenize`
drawn from their fields (`tests/fuzz_fields.py`). Never a 5xx; a bad field is a 4xx naming it;
the server stays whole (`fuzz_server.assert_alive`). The server is the fuzz modules' shared one (`fuzzed`).

Cost: ~3 s at the default budget; `SGLR_FUZZ_SCALE=N` runs N times the examples."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, unquote

import httpx
import pytest
from fuzz_server import assert_alive, post
from hypothesis import given, note
from hypothesis import strategies as st
from server_harness import Served

from fuzz_fields import TOKEN_IDS, VOCAB_SIZE, Field, RouteFields, bad_body, valid_body
from fuzz_support import (
    ANY_JSON,
    LONE_SURROGATES,
    TEXT,
    assert_refused_naming,
    check_response,
    encode,
    fuzz_settings,
    wrong_types,
)

ABORT = RouteFields(
    "/abort_request",
    base={"rid": "no-such-request"},
    fields=(
        Field("rid", st.uuids().map(str), wrong_types("str", "null")),
        Field("abort_all", st.booleans(), wrong_types("bool", "null")),
    ),
    bounds=(),
)
JOIN = RouteFields(
    "/concate_and_append_request",
    base={"src_rids": ["a"], "dst_rid": "b"},
    fields=(
        Field(
            "src_rids",
            st.lists(TEXT, max_size=3),
            wrong_types("list") | st.sampled_from([[1], [None], ["a", 2]]),
        ),
        Field("dst_rid", TEXT, wrong_types("str")),
    ),
    bounds=(),
)
# A model field either route takes: a name of what is served, or a 4xx naming it.
MODEL = Field(
    "model", st.sampled_from([None, "default"]), st.sampled_from(["no-such-model", 5, [], {}, True])
)
TOKENIZE = RouteFields(
    "/tokenize",
    base={"prompt": "hello"},
    fields=(
        Field(
            "prompt",
            TEXT | st.lists(TEXT, min_size=1, max_size=3),
            wrong_types("str", "list")
            | LONE_SURROGATES
            | st.sampled_from([[], [1], [None], [["a"]], ["a\ud800"]]),
        ),
        Field("add_special_tokens", st.booleans() | st.none(), wrong_types("bool", "null")),
        MODEL,
    ),
    bounds=(),
)
DETOKENIZE = RouteFields(
    "/detokenize",
    base={"tokens": [1]},
    fields=(
        Field(
            "tokens",
            TOKEN_IDS
            | st.lists(st.lists(st.integers(0, VOCAB_SIZE - 1), max_size=12), min_size=1, max_size=3),
            wrong_types("list")
            | st.sampled_from(
                [[], [-1], [VOCAB_SIZE], [2**70], ["a"], [1.5], [True], [[1], "x"], [1, [2]], [None]]
            ),
        ),
        MODEL,
    ),
    bounds=(),
)
INFO_PATHS = [
    "/health",
    "/health_generate",
    "/model_info",
    "/get_model_info",
    "/server_info",
    "/get_server_info",
    "/v1/models",
    "/metrics",
    "/",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]


@pytest.fixture(scope="module")
def client(fuzzed: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzzed.url, timeout=120) as c:
        yield c


@pytest.mark.parametrize("route", [ABORT, JOIN, TOKENIZE, DETOKENIZE], ids=lambda r: r.path)
def test_control_bodies_are_answered_or_refused_naming_the_field(
    fuzzed: Served, client: httpx.Client, route: RouteFields
) -> None:
    @fuzz_settings(20)
    @given(valid_body(route), bad_body(route))
    def run(good: dict, case: tuple[dict, str]) -> None:
        assert post(client, route.path, good).status_code == 200
        body, field = case
        assert_refused_naming(post(client, route.path, body), field)

    run()
    assert_refused_naming(post(client, "/abort_request", {}), "rid")
    assert_refused_naming(post(client, "/abort_request", {"rid": "x", "stop": 1}), "stop")
    assert_alive(fuzzed, client)


def test_info_routes_take_any_query_and_method(fuzzed: Served, client: httpx.Client) -> None:
    @fuzz_settings(40)
    @given(
        st.sampled_from(INFO_PATHS),
        st.sampled_from(METHODS),
        st.dictionaries(TEXT, TEXT, max_size=3),
        ANY_JSON,
    )
    def run(path: str, method: str, query: dict, body: object) -> None:
        response = client.request(method, path, params=query, content=encode(body))
        note(f"{method} {path} {query!r} -> {response.status_code} {response.text[:300]}")
        assert response.status_code in (200, 405), response.text[:300]
        if method != "HEAD":
            check_response(response)

    run()
    assert_alive(fuzzed, client)


def test_any_model_path_is_found_or_a_404_naming_the_model(fuzzed: Served, client: httpx.Client) -> None:
    served_name = client.get("/v1/models").json()["data"][0]["id"]
    # Any text, percent-encoded; and escapes sent as they are (one that decodes to no UTF-8).
    segments = st.text(st.characters(codec="utf-8"), max_size=12).map(lambda m: quote(m, safe="/"))
    segments |= st.sampled_from(["%ff%00", "%2e%2e/x", "a/b", "%C3%A9"])

    @fuzz_settings(30)
    @given(segments)
    def run(raw: str) -> None:
        response = client.get(f"/v1/models/{raw}")
        note(f"{raw!r} -> {response.status_code} {response.text[:300]}")
        check_response(response)
        if response.status_code != 200:  # a name with a line break matches no route at all
            param = response.json()["error"]["param"]
            assert response.status_code == 404 and (param == "model" or "\n" in unquote(raw))

    run()
    assert client.get(f"/v1/models/{quote(served_name, safe='/')}").json()["id"] == served_name
    assert_alive(fuzzed, client)


def test_flush_cache_timeouts_are_taken_or_refused_naming_it(fuzzed: Served, client: httpx.Client) -> None:
    bad = st.sampled_from(["x", "-1", "nan", "inf", "-inf", "1e400", "", "\u00ff", "3601", "0x10", "1_0 0"])

    @fuzz_settings(20)
    @given(st.sampled_from(["0", "0.01", "1e-3", " 0 "]), bad, st.sampled_from(["GET", "POST"]))
    def run(good: str, timeout: str, method: str) -> None:
        assert client.request(method, "/flush_cache", params={"timeout": good}).status_code == 200
        assert_refused_naming(client.request(method, "/flush_cache", params={"timeout": timeout}), "timeout")

    run()
    assert_alive(fuzzed, client)
