"""Fuzzed requests on `sglr-router` in front of one tiny-model `sglr-server`: the generation
routes' bodies (`tests/fuzz_fields.py`) pass through to the worker, whose 4xx reaches the client
naming the bad field; the admin routes (`/add_worker`, `/remove_worker`, the any-worker and
every-worker routes) get fuzzed URLs, query strings, bodies and methods; raw HTTP gets garbage.
Never a 5xx from the router, never a crash: after each test it still answers `/health` and
routes a normal request, its pool's invariants hold, and the worker leaked no KV slot. The
router runs in this process on its own event-loop thread, the worker on a uvicorn thread.

Cost: ~10 s at the default budget; `SGLR_FUZZ_SCALE=N` runs N times the examples (docs/testing.md).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from in_process_router import InProcessRouter

from fuzz_fields import FUZZ_CONTEXT_LEN, NATIVE, RouteFields, bad_body, wild_body
from fuzz_openai_fields import CHAT, COMPLETIONS
from fuzz_support import ANY_JSON, TEXT, assert_refused_naming, check_response, encode, fuzz_settings
from sglr.engine.engine import Engine
from sglr.http.background import serve_in_background
from sglr.server import ServerSettings, build_app

ROUTES = [NATIVE, COMPLETIONS, CHAT]


class Stack(InProcessRouter):
    """One worker (an engine behind `sglr-server`'s app) and a router in front of it."""

    def __init__(self, engine: Engine, worker_url: str) -> None:
        self.engine = engine
        self.worker_url = worker_url
        super().__init__([worker_url], name="fuzz-router")


@pytest.fixture(scope="module")
def stack(tiny_dir: Path) -> Iterator[Stack]:
    engine = Engine(
        model_path=str(tiny_dir),
        device="cpu",
        max_total_tokens=16384,
        context_length=FUZZ_CONTEXT_LEN,
        debug_invariants=True,
    )
    try:
        with serve_in_background(
            build_app(engine, ServerSettings()), timeout_graceful_shutdown=5
        ) as worker_url:
            stack = Stack(engine, worker_url)
            try:
                yield stack
            finally:
                stack.close()
    finally:
        engine.shutdown()


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=120) as c:
        yield c


def assert_alive(stack: Stack, client: httpx.Client) -> None:
    """The router answers its probe, routes a normal request to its one worker (healthy, holding
    nothing in flight), its pool's invariants hold; the worker leaked no KV slot."""
    assert client.get("/health").json() == {"num_healthy_workers": 1}
    answer = client.post(
        "/generate", json={"text": "still here", "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}
    )
    assert answer.status_code == 200 and answer.json()["meta_info"]["completion_tokens"] == 2
    workers = client.get("/list_workers").json()["workers"]
    assert [(w["url"], w["healthy"], w["num_in_flight"]) for w in workers] == [(stack.worker_url, True, 0)]
    stack.pool.check_invariants()
    stats = stack.engine.get_stats()
    assert stats["num_running_requests"] == stats["num_waiting_requests"] == 0
    stack.engine.check_invariants()


def post(client: httpx.Client, path: str, content: bytes, **headers: str) -> httpx.Response:
    note(f"POST {path} {content[:2000]!r}")
    response = client.post(path, content=content, headers={"content-type": "application/json", **headers})
    check_response(response)
    return response


def _by_path(route: RouteFields) -> str:
    return route.path


@pytest.mark.parametrize("route", ROUTES, ids=_by_path)
def test_a_bad_field_passes_through_to_a_4xx_naming_it(
    stack: Stack, client: httpx.Client, route: RouteFields
) -> None:
    @fuzz_settings(25)
    @given(bad_body(route))
    def run(case: tuple[dict, str]) -> None:
        body, field = case
        assert_refused_naming(post(client, route.path, encode(body)), field)

    run()
    assert_alive(stack, client)


@pytest.mark.parametrize("route", ROUTES, ids=_by_path)
def test_any_body_through_the_router_is_never_a_server_error(
    stack: Stack, client: httpx.Client, route: RouteFields
) -> None:
    raw = st.binary(max_size=48) | st.sampled_from([b"", b"[" * 100_000, b'"\\ud800"', b"{}", b"\xff"])

    @fuzz_settings(25)
    @given(wild_body(route).map(encode) | raw)
    def run(content: bytes) -> None:
        post(client, route.path, content)

    run()
    assert_alive(stack, client)


BAD_URLS = st.sampled_from(
    [
        "",
        "x",
        "ftp://127.0.0.1:1",
        "http://",
        "//127.0.0.1:1",
        "http://[::1",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:-1",
        "http://a b",
        "http://\x00",
        "http://x:1/a\tb",
        "http://127.0.0.1:1\ud800",
        " ",
    ]
)
NOT_STRINGS = st.sampled_from([5, None, [], {}, True, ["http://127.0.0.1:1"]])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_worker_membership_routes_refuse_bad_urls_naming_them(stack: Stack, client: httpx.Client) -> None:
    closed = f"http://127.0.0.1:{_closed_port()}"

    @fuzz_settings(30)
    @given(st.sampled_from(["/add_worker", "/remove_worker"]), BAD_URLS | NOT_STRINGS, st.booleans())
    def run(path: str, url: object, as_query: bool) -> None:
        try:
            if as_query and isinstance(url, str):  # surrogates as the bytes of their UTF-8 form
                response = client.post(f"{path}?url={quote(url.encode('utf-8', 'surrogatepass'))}")
            else:
                response = client.post(path, content=encode({"url": url}))
            note(f"{path} {url!r} -> {response.text[:300]}")
            assert_refused_naming(response, "url")
        finally:  # a URL wrongly taken must not outlive its example
            for worker in stack.pool.workers:
                if worker.url != stack.worker_url:
                    stack.pool.remove_worker(worker.url)

    run()
    # A well-formed URL of nothing: added (unhealthy, so never routed to), refused twice,
    # removed, then unknown.
    assert not client.post("/add_worker", params={"url": closed}).json()["healthy"]
    assert_refused_naming(client.post("/add_worker", params={"url": closed + "/"}), "url")
    assert client.post("/remove_worker", content=encode({"url": closed})).status_code == 200
    assert client.post("/remove_worker", params={"url": closed}).status_code == 404
    assert_alive(stack, client)


def test_admin_routes_take_any_query_body_and_method(stack: Stack, client: httpx.Client) -> None:
    paths = st.sampled_from(
        [
            "/health",
            "/health_generate",
            "/v1/models",
            "/model_info",
            "/get_model_info",
            "/server_info",
            "/get_server_info",
            "/flush_cache",
            "/abort_request",
            "/tokenize",
            "/v1/detokenize",
            "/list_workers",
            "/metrics",
            "/v1/models/x",
            "/generate",
            "/no/such/route",
            "/v1/models/%ff%00",
            "/%2e%2e/%2e%2e/etc/passwd",
        ]
    )
    methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
    queries = st.dictionaries(TEXT, TEXT, max_size=3)
    bodies = ANY_JSON.map(encode) | st.binary(max_size=32)

    @fuzz_settings(60)
    @given(paths, methods, queries, bodies)
    def run(path: str, method: str, query: dict, body: bytes) -> None:
        if path == "/generate" and method in ("POST", "PUT"):
            body = encode({"text": "x", "sampling_params": {"max_new_tokens": 1}})
        response = client.request(method, path, params=query, content=body)
        note(f"{method} {path} {query!r} {body[:200]!r} -> {response.status_code} {response.text[:300]}")
        if method == "HEAD":  # no body to read
            assert response.status_code < 500
            return
        check_response(response)
        if (
            response.status_code >= 400
            and path in ("/abort_request", "/flush_cache")
            and response.status_code != 405
        ):
            # An every-worker route passes on the worker's error, naming its field when it has one.
            assert "error" in response.json() and "workers" in response.json()

    run()
    assert_alive(stack, client)


def _exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_garbage_http_is_a_400_or_a_closed_connection(stack: Stack, client: httpx.Client) -> None:
    lines = st.sampled_from(
        [
            b"POST /generate HTTP/1.1\r\n",
            b"GET / HTTP/9.9\r\n",
            b"\x00\xff\r\n",
            b"POST /generate HTTP/1.1\r\ncontent-length: -1\r\n",
            b"POST /generate HTTP/1.1\r\ncontent-length: 99999999999999999999\r\n",
            b"POST /generate HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            b"GET /health HTTP/1.1\r\nhost: " + b"a" * 70_000 + b"\r\n",
            b'POST /v1/completions HTTP/1.1\r\ncontent-length: 5\r\n\r\n{"a"',
        ]
    )

    @fuzz_settings(30)
    @given(lines, st.binary(max_size=64))
    def run(head: bytes, tail: bytes) -> None:
        answer = _exchange(stack.port, head + tail)
        note(f"{head[:100]!r} {tail!r} -> {answer[:300]!r}")
        if answer:
            status = int(answer.split(b" ", 2)[1])
            assert status < 500, answer[:500]

    run()
    assert_alive(stack, client)


# Regressions found by the fuzzing above, each with its minimal failing request.


def test_a_prompt_with_a_lone_surrogate_routes_to_the_worker_which_refuses_it(client: httpx.Client) -> None:
    # Was a 500: the routing key's UTF-8 encoding failed in the router.
    answer = client.post("/v1/completions", content=b'{"prompt": "\\ud800", "max_tokens": 3}')
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "prompt"


def test_head_on_a_generation_route_gets_no_body(stack: Stack, client: httpx.Client) -> None:
    # Was a body after the 405's head: the client read it as the next response's status line.
    assert client.head("/generate").status_code == 405
    assert client.get("/health").status_code == 200  # the same kept-alive connection
    raw = _exchange(stack.port, b"HEAD /generate HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405 ") and b"content-length: " in head and body == b""


@pytest.mark.parametrize("url", ["", "http://127.0.0.1:99999", "http://a b"])
def test_a_worker_url_that_is_no_url_is_a_400_naming_it(client: httpx.Client, url: str) -> None:
    # Were a 400 without `param`, a 500 (the port), a worker added (the space).
    assert_refused_naming(client.post("/add_worker", params={"url": url}), "url")


def test_adding_a_worker_twice_is_a_400_naming_its_url(stack: Stack, client: httpx.Client) -> None:
    assert_refused_naming(client.post("/add_worker", params={"url": stack.worker_url}), "url")


def test_an_every_worker_route_passes_on_the_workers_error(stack: Stack, client: httpx.Client) -> None:
    # Was `{"workers": {...}}` alone: the client could not tell which field was wrong.
    answer = client.post("/abort_request", content=b"{}")
    assert answer.status_code == 400 and answer.json()["workers"] == {stack.worker_url: 400}
    assert_refused_naming(answer, "rid")


def test_a_model_path_that_decodes_to_no_url_is_forwarded_as_sent(client: httpx.Client) -> None:
    # Was a 500: the router forwarded the decoded path, which is no URL.
    answer = client.get("/v1/models/%ff%00")
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "model"
