"""Fuzzed bodies on `sglr-server`'s generation routes (`/generate`, `/v1/completions`,
`/v1/chat/completions`), drawn from each route's declared fields (`tests/fuzz_fields.py`): a
valid body is answered (200), a body bad in one field is a 4xx naming that field, and nothing
(any JSON under the field names, any bytes, any content type) is ever a 5xx or stops the
server: after each test it still answers `/health` and a normal request, with no KV slot
leaked. One server (tiny model, short context: `fuzzed` in conftest.py) serves all the fuzz
modules.

Cost: ~15 s at the default budget; `SGLR_FUZZ_SCALE=N` runs N times the examples, randomized
(docs/testing.md)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fuzz_server import assert_alive, post
from hypothesis import given
from hypothesis import strategies as st
from server_harness import Served

from fuzz_fields import (
    NATIVE,
    NATIVE_UNKNOWN,
    NATIVE_UNKNOWN_SAMPLING,
    VOCAB_SIZE,
    RouteFields,
    bad_body,
    valid_body,
    wild_body,
)
from fuzz_openai_fields import CHAT, COMPLETIONS
from fuzz_support import assert_refused_naming, check_response, encode, fuzz_settings, nested

ROUTES = [NATIVE, COMPLETIONS, CHAT]


@pytest.fixture(scope="module")
def client(fuzzed: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzzed.url, timeout=120) as c:
        assert c.get("/model_info").json()["vocab_size"] == VOCAB_SIZE
        yield c


def _by_path(route: RouteFields) -> str:
    return route.path


@pytest.mark.parametrize("route", ROUTES, ids=_by_path)
def test_valid_bodies_are_answered(fuzzed: Served, client: httpx.Client, route: RouteFields) -> None:
    @fuzz_settings(40)
    @given(valid_body(route))
    def run(body: dict) -> None:
        response = post(client, route.path, body)
        assert response.status_code == 200, f"{body!r} -> {response.text[:300]}"

    run()
    assert_alive(fuzzed, client)


@pytest.mark.parametrize("route", ROUTES, ids=_by_path)
def test_a_body_bad_in_one_field_is_refused_naming_it(
    fuzzed: Served, client: httpx.Client, route: RouteFields
) -> None:
    @fuzz_settings(80)
    @given(bad_body(route))
    def run(case: tuple[dict, str]) -> None:
        body, field = case
        assert_refused_naming(post(client, route.path, body), field)

    run()
    assert_alive(fuzzed, client)


@pytest.mark.parametrize("route", ROUTES, ids=_by_path)
def test_any_json_under_the_field_names_is_never_a_server_error(
    fuzzed: Served, client: httpx.Client, route: RouteFields
) -> None:
    @fuzz_settings(40)
    @given(wild_body(route))
    def run(body: dict) -> None:
        post(client, route.path, body)
        assert client.get("/health").status_code == 200

    run()
    assert_alive(fuzzed, client)


def test_unknown_fields_are_refused_naming_them(fuzzed: Served, client: httpx.Client) -> None:
    known_openai = {*COMPLETIONS.names(), *CHAT.names()}

    @fuzz_settings(30)
    @given(
        NATIVE_UNKNOWN,
        NATIVE_UNKNOWN_SAMPLING,
        st.text(min_size=1, max_size=12).filter(lambda k: k not in known_openai),
    )
    def run(native_key: str, sampling_key: str, openai_key: str) -> None:
        body = {"text": "x", native_key: 1}
        assert_refused_naming(post(client, "/generate", body), native_key)
        body = {"text": "x", "sampling_params": {sampling_key: 1}}
        assert_refused_naming(post(client, "/generate", body), f"sampling_params.{sampling_key}")
        for route in (COMPLETIONS, CHAT):
            assert_refused_naming(post(client, route.path, {**route.base, openai_key: 1}), openai_key)

    run()
    assert_alive(fuzzed, client)


_JSON_TYPES = [
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=latin-1",
    "",
    "\u00ff/\u00ff",
    "application/octet-stream",
]


@st.composite
def raw_bodies(draw) -> bytes:
    """Bodies that are not quite JSON objects: broken, truncated, re-encoded, nested, NaN."""
    route = draw(st.sampled_from(ROUTES))
    whole = encode(draw(valid_body(route)))
    kind = draw(
        st.sampled_from(["bytes", "truncated", "utf16", "bom", "constant", "nested", "digits", "flipped"])
    )
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "truncated":
        return whole[: draw(st.integers(0, len(whole) - 1))]
    if kind == "utf16":
        return whole.decode().encode(draw(st.sampled_from(["utf-16", "utf-32", "utf-16-le"])))
    if kind == "bom":
        return b"\xef\xbb\xbf" + whole
    if kind == "constant":
        constant = draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
        return whole.replace(b"3", constant.encode(), 1) if b"3" in whole else constant.encode()
    if kind == "nested":
        return encode(
            {**draw(st.sampled_from(ROUTES)).base, "x": nested(draw(st.sampled_from([990, 5000, 100_000])))}
        )
    if kind == "digits":
        return b'{"text": "x", "sampling_params": {"max_new_tokens": ' + b"9" * 5000 + b"}}"
    at = draw(st.integers(0, len(whole) - 1))
    return whole[:at] + bytes([whole[at] ^ (1 << draw(st.integers(0, 7)))]) + whole[at + 1 :]


def test_raw_bodies_and_content_types_are_never_a_server_error(fuzzed: Served, client: httpx.Client) -> None:
    @fuzz_settings(60)
    @given(raw_bodies(), st.sampled_from([r.path for r in ROUTES]), st.sampled_from(_JSON_TYPES))
    def run(raw: bytes, path: str, content_type: str) -> None:
        response = client.post(path, content=raw, headers={"content-type": content_type.encode("latin-1")})
        check_response(response)

    run()
    for path in (r.path for r in ROUTES):  # no body at all, and one sent in chunks
        assert client.post(path).status_code == 400
        chunked = client.post(path, content=iter([b'{"prompt": "x", ', b'"max_tokens": 1}']))
        check_response(chunked)
    assert_alive(fuzzed, client)
