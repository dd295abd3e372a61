"""`sglr-router --api-key`: every route, the admin app's table and the generation fast path
alike, refuses a missing or wrong key with a 401 in sglr's error shape and lets the right one
through; the public routes need none; the fast path decides by `hmac.compare_digest` alone.
And the size limits at its front: bodies (413, before a byte of an announced one is read) and
headers (431) on every route, the router serving on after each."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from test_router_fast_path import Harness, _raw_exchange

import sglr.http.auth
from sglr.http.auth import PUBLIC_PATHS, UNAUTHORIZED_MESSAGE
from sglr.limits import MAX_HEADER_BYTES
from sglr.router.keys import GENERATION_PATHS

KEY = "router-secret"
MAX_BODY = 4096
UNAUTHORIZED = {"error": {"message": UNAUTHORIZED_MESSAGE, "type": "authentication_error", "param": None,
                          "code": 401}}  # fmt: skip
BAD_AUTHORIZATIONS = ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY},
                      {"Authorization": f"Basic {KEY}"}, {"Authorization": f"Bearer {KEY}x"})  # fmt: skip


@pytest.fixture(scope="module")
def guarded() -> Iterator[Harness]:
    harness = Harness(api_key=KEY, max_body_bytes=MAX_BODY)
    try:
        yield harness
    finally:
        harness.close()


def route_table(harness: Harness) -> list[tuple[str, str]]:
    """(method, path) of every route: the admin app's, read from the app, and the fast path's."""
    pairs = [(method, path) for path in GENERATION_PATHS for method in ("POST", "PUT", "GET", "DELETE")]
    for route in harness.app.routes:
        path = re.sub(r"\{[^}]+\}", "default", route.path)
        pairs += [(method, path) for method in sorted(route.methods)]
    assert len(pairs) >= 30, pairs
    return pairs


def test_every_route_but_the_public_ones_needs_the_key(guarded: Harness) -> None:
    table = route_table(guarded)
    assert {path for _, path in table} >= PUBLIC_PATHS  # the router serves all of them too
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        for method, path in table:
            if path in PUBLIC_PATHS:
                assert client.request(method, path).status_code != 401, (method, path)
                continue
            for headers in BAD_AUTHORIZATIONS:
                response = client.request(method, path, headers=headers, json={"text": "x"})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"] == "Bearer"
                if method != "HEAD":
                    assert response.json() == UNAUTHORIZED, (method, path)
            if method == "HEAD":  # GET's handler; the scripted workers would answer it with a body
                continue
            for authorization in (f"Bearer {KEY}", f"bearer {KEY}"):
                response = client.request(
                    method, path, headers={"Authorization": authorization}, json={"text": "x"}
                )
                assert response.status_code != 401, (method, path, authorization)


def test_the_fast_path_decides_by_compare_digest_alone(guarded: Harness, monkeypatch) -> None:
    calls = []

    def forced(answer: bool):
        def compare(a: bytes, b: bytes) -> bool:
            calls.append((len(a), len(b)))
            return answer

        return compare

    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        monkeypatch.setattr(sglr.http.auth, "compare_digest", forced(True))
        wrong = client.post("/generate", json={"text": "in"}, headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 200 and wrong.json()["text"] == "in"
        monkeypatch.setattr(sglr.http.auth, "compare_digest", forced(False))
        right = client.post("/generate", json={"text": "out"}, headers={"Authorization": f"Bearer {KEY}"})
        assert right.status_code == 401
    assert calls == [(32, 32), (32, 32)]


def test_every_route_refuses_a_body_over_the_limit(guarded: Harness) -> None:
    def chunked():
        for _ in range(5):
            yield b" " * 1000

    with httpx.Client(base_url=guarded.url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as client:
        for method, path in route_table(guarded):
            for content in (b"x" * (MAX_BODY + 1), chunked()):
                response = client.request(method, path, content=content)
                assert response.status_code == 413, (method, path)
                assert response.headers["connection"] == "close"
                if method != "HEAD":
                    assert f"limit of {MAX_BODY} bytes" in response.json()["error"]["message"]
        fits = client.post("/generate", json={"text": "y" * (MAX_BODY - 20)})
        assert fits.status_code == 200 and fits.json()["text"] == "y" * (MAX_BODY - 20)
    assert all(w.num_requests for w in guarded.workers)


def test_an_announced_body_over_the_limit_is_refused_unread(guarded: Harness) -> None:
    # No body follows the head: the answer comes from the length alone.
    head = b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % (MAX_BODY + 1)
    assert _raw_exchange(guarded.port, head).startswith(b"HTTP/1.1 413 ")


def test_headers_over_the_limit_get_431(guarded: Harness) -> None:
    pad = b"".join(b"x-pad-%d: %b\r\n" % (i, b"p" * 1000) for i in range(MAX_HEADER_BYTES // 1000 + 1))
    many = b"POST /generate HTTP/1.1\r\nhost: x\r\n" + pad + b"content-length: 2\r\n\r\n{}"
    assert _raw_exchange(guarded.port, many).startswith(b"HTTP/1.1 431 ")
    long_url = b"GET /list_workers?" + b"q" * MAX_HEADER_BYTES + b" HTTP/1.1\r\nhost: x\r\n\r\n"
    assert _raw_exchange(guarded.port, long_url).startswith(b"HTTP/1.1 431 ")
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        ok = client.post("/generate", json={"text": "x"}, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
