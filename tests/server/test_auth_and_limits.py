"""API key (constant-time Bearer check on every route of the route table but the public ones),
the body and head size limits on every route, and each per-field limit of `sglr.limits` one
past it (a 400 naming the field, before the work) and at it."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from server_harness import Served, serve, served_engine

import sglr.http.auth
from sglr import limits
from sglr.http.auth import PUBLIC_PATHS
from sglr.limits import MAX_HEADER_BYTES
from sglr.server import ServerSettings, build_app

KEY = "sk-test-0123456789"
SETTINGS = ServerSettings(api_key=KEY, enable_metrics=True, max_body_bytes=4096)
SMALL = ServerSettings(max_messages=3, max_tools=2, max_tool_schema_bytes=300, max_sequences_per_request=4)
# Every way a request can fail to carry the key.
BAD_AUTHORIZATIONS = ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY},
                      {"Authorization": f"Basic {KEY}"}, {"Authorization": "Bearer"},
                      {"Authorization": f"Bearer {KEY}x"}, {"X-Api-Key": KEY})  # fmt: skip


# The routes whose handlers read a body.
READS_BODY = {("POST", "/generate"), ("PUT", "/generate"), ("POST", "/v1/completions"),
              ("POST", "/v1/chat/completions"), ("POST", "/abort_request"),
              ("POST", "/concate_and_append_request"), ("POST", "/load_lora_adapter"),
              ("POST", "/unload_lora_adapter"), ("POST", "/tokenize"), ("POST", "/v1/tokenize"),
              ("POST", "/detokenize"), ("POST", "/v1/detokenize"), ("POST", "/encode"),
              ("PUT", "/encode"), ("POST", "/v1/embeddings"), ("POST", "/v1/responses"),
              ("POST", "/open_session"), ("POST", "/close_session"), ("POST", "/v1/files"),
              ("POST", "/v1/batches")}  # fmt: skip


@pytest.fixture(scope="module")
def guarded(tiny_dir):
    with served_engine(tiny_dir, SETTINGS) as served:
        yield served


def route_table(served: Served) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, read from the app itself (so a new route
    is covered here without being named), path parameters filled in."""
    app = build_app(served.engine, SETTINGS)  # the served app's table: same engine, same settings
    pairs = []
    for route in app.routes:
        path = re.sub(r"\{[^}]+\}", "default", route.path)
        pairs += [(method, path) for method in sorted(route.methods)]
    assert len(pairs) >= 20, pairs  # the table was read
    return pairs


def test_every_route_but_the_public_ones_needs_the_key(guarded: Served) -> None:
    # The public list changes only on purpose (and with docs/server.md).
    # The dashboard's page and script hold no data (its data route needs the key).
    assert {
        "/health",
        "/health_generate",
        "/metrics",
        "/dashboard",
        "/dashboard/dashboard.js",
    } == PUBLIC_PATHS
    table = route_table(guarded)
    assert {path for _, path in table} >= PUBLIC_PATHS  # no stale entry in the public list
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        for method, path in table:
            if path in PUBLIC_PATHS:
                assert client.request(method, path).status_code != 401, (method, path)
                continue
            for headers in BAD_AUTHORIZATIONS:
                response = client.request(method, path, headers=headers)
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"] == "Bearer"
                if method != "HEAD":
                    assert response.json() == {"error": {"message": sglr.http.auth.UNAUTHORIZED_MESSAGE,
                                                         "type": "authentication_error", "param": None,
                                                         "code": 401}}  # fmt: skip
            for authorization in (f"Bearer {KEY}", f"bearer {KEY}", f"Bearer   {KEY}"):
                response = client.request(method, path, headers={"Authorization": authorization})
                assert response.status_code != 401, (method, path, authorization)


def test_the_public_routes_are_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    section = docs[docs.index("## Auth and limits") :]
    section = section[: section.index("\n## ", 1)]
    assert all(f"`{path}`" in section for path in PUBLIC_PATHS), section


def test_the_key_is_compared_by_compare_digest_alone(guarded: Served, monkeypatch) -> None:
    """The comparison is `hmac.compare_digest` (constant time), and its answer is the decision:
    forced to True a wrong key gets in, forced to False the right key does not."""
    import hmac

    assert sglr.http.auth.compare_digest is hmac.compare_digest
    calls = []

    def forced(answer: bool):
        def compare(a: bytes, b: bytes) -> bool:
            calls.append((len(a), len(b)))
            return answer

        return compare

    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        monkeypatch.setattr(sglr.http.auth, "compare_digest", forced(True))
        assert (
            client.post("/generate", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 200
        )
        monkeypatch.setattr(sglr.http.auth, "compare_digest", forced(False))
        assert (
            client.post("/generate", json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 401
        )
    # Digests of the same length whatever the token: the time does not tell the key's length.
    assert calls == [(32, 32), (32, 32)]


def test_routes_need_the_bearer_key(guarded: Served) -> None:
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        body = {"text": "hi", "sampling_params": {"max_new_tokens": 2}}
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": KEY},
            {"Authorization": f"Basic {KEY}"},
        ):
            response = client.post("/generate", json=body, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["type"] == "authentication_error"
            assert response.headers["www-authenticate"] == "Bearer"
        for path in ("/model_info", "/server_info", "/v1/models", "/flush_cache"):
            assert client.get(path).status_code == 401
        ok = client.post("/generate", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        assert (
            client.post("/generate", json=body, headers={"Authorization": f"bearer {KEY}"}).status_code == 200
        )


def test_health_and_metrics_are_exempt(guarded: Served) -> None:
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/health_generate").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_openai_client_sends_the_key(guarded: Served) -> None:
    good = openai.OpenAI(base_url=guarded.url + "/v1", api_key=KEY, max_retries=0)
    assert good.completions.create(model="default", prompt="hi", max_tokens=2).usage.completion_tokens <= 2
    bad = openai.OpenAI(base_url=guarded.url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.completions.create(model="default", prompt="hi", max_tokens=2)


def test_large_bodies_are_refused_with_413(guarded: Served) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=guarded.url, timeout=30, headers=headers) as client:
        big = {"text": "x" * 5000, "sampling_params": {"max_new_tokens": 1}}
        response = client.post("/generate", json=big)
        assert response.status_code == 413 and "4096 bytes" in response.json()["error"]["message"]

        def chunks():  # no Content-Length: counted while reading
            for _ in range(10):
                yield b" " * 1000

        streamed = client.post("/generate", content=chunks())
        assert streamed.status_code == 413
        assert (
            client.post(
                "/generate", json={"text": "fits", "sampling_params": {"max_new_tokens": 1}}
            ).status_code
            == 200
        )


def test_every_route_refuses_a_body_over_the_limit(guarded: Served) -> None:
    """Announced larger: 413 unread, on every route (public ones too). Sent without a length:
    413 where the route reads it; a route that never reads its body just answers."""
    big = b"x" * 5000

    def chunked():
        for _ in range(5):
            yield b" " * 1000

    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=guarded.url, timeout=30, headers=headers) as client:
        for method, path in route_table(guarded):
            response = client.request(method, path, content=big)
            assert response.status_code == 413, (method, path)
            if method != "HEAD":
                error = response.json()["error"]
                assert error["type"] == "invalid_request_error" and "4096 bytes" in error["message"]
            streamed = client.request(method, path, content=chunked())
            if (method, path) in READS_BODY:
                assert streamed.status_code == 413, (method, path)
            else:
                assert streamed.status_code == client.request(method, path).status_code, (method, path)
        assert set(route_table(guarded)) >= READS_BODY


def test_headers_over_the_limit_get_431(guarded: Served) -> None:
    host, port = guarded.url.removeprefix("http://").split(":")
    pad = b"".join(b"x-pad-%d: %b\r\n" % (i, b"p" * 1000) for i in range(MAX_HEADER_BYTES // 1000 + 1))
    for request in (b"GET /health HTTP/1.1\r\nhost: x\r\n" + pad + b"\r\n",
                    b"GET /health?" + b"q" * MAX_HEADER_BYTES + b" HTTP/1.1\r\nhost: x\r\n\r\n"):  # fmt: skip
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 431 ")
        assert json.loads(body)["error"]["code"] == 431
    assert httpx.get(guarded.url + "/health", timeout=30).status_code == 200


@pytest.fixture(scope="module")
def small(guarded: Served) -> Iterator[Served]:
    """The same engine behind an app with small limits (and no key)."""
    with serve(build_app(guarded.engine, SMALL)) as url:
        yield Served(guarded.engine, url)


def chat(messages: int = 1, tools: list | None = None) -> dict:
    body = {"model": "default", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}] * messages}
    return body if tools is None else {**body, "tools": tools}


def tool(name: str, schema_bytes: int = 0) -> dict:
    properties = {"a": {"type": "string", "description": "d" * schema_bytes}} if schema_bytes else {}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


def schema_len(t: dict) -> int:
    return len(json.dumps(t["function"]["parameters"]).encode())


def refused(response: httpx.Response, param: str, words: str) -> bool:
    error = response.json()["error"]
    return response.status_code == 400 and error["param"] == param and words in error["message"]


def test_chat_messages_and_tools_are_bounded(small: Served) -> None:
    with httpx.Client(base_url=small.url + "/v1", timeout=60) as client:
        assert client.post("/chat/completions", json=chat(3)).status_code == 200
        assert refused(client.post("/chat/completions", json=chat(4)), "messages", "limit of 3")
        assert client.post("/chat/completions", json=chat(1, [tool("a"), tool("b")])).status_code == 200
        many = chat(1, [tool("a"), tool("b"), tool("c")])
        assert refused(client.post("/chat/completions", json=many), "tools", "limit of 2")
        big = tool("a", 300)
        assert schema_len(big) > 300
        fits = tool("a", 300 - (schema_len(big) - 300))
        assert schema_len(fits) == 300
        assert client.post("/chat/completions", json=chat(1, [fits])).status_code == 200
        response = client.post("/chat/completions", json=chat(1, [tool("b"), big]))
        assert refused(response, "tools[1].function.parameters", "over the server's limit of 300")


def test_fan_out_and_logprobs_are_bounded(small: Served) -> None:
    with httpx.Client(base_url=small.url, timeout=60) as client:
        ok = {"text": ["a", "b"], "sampling_params": {"n": 2, "max_new_tokens": 1}}
        assert client.post("/generate", json=ok).status_code == 200
        over = {"text": ["a", "b"], "sampling_params": {"n": 3, "max_new_tokens": 1}}
        assert refused(client.post("/generate", json=over), "sampling_params.n", "limit of 4")
        at = {"text": "a", "return_logprob": True, "top_logprobs_num": limits.MAX_LOGPROBS,
              "sampling_params": {"max_new_tokens": 1}}  # fmt: skip
        answer = client.post("/generate", json=at)
        assert answer.status_code == 200
        assert len(answer.json()["meta_info"]["output_top_logprobs"][0]) == limits.MAX_LOGPROBS
        past = {**at, "top_logprobs_num": limits.MAX_LOGPROBS + 1}
        assert refused(
            client.post("/generate", json=past), "top_logprobs_num", f"at most {limits.MAX_LOGPROBS}"
        )


def test_a_prompt_too_long_for_any_tokenization_is_refused_untokenized(small: Served) -> None:
    engine = small.engine
    max_chars = engine.context_len * engine.tokenizer.longest_token_chars * limits.PROMPT_CHARS_MARGIN
    with httpx.Client(base_url=small.url, timeout=120) as client:
        too_long = {"text": "ab " * (max_chars // 3 + 1), "sampling_params": {"max_new_tokens": 1}}
        assert refused(client.post("/generate", json=too_long), "text", f"{max_chars} characters at most")
        # At the limit it is tokenized, and refused for its token count instead.
        at = {"text": ("ab " * (max_chars // 3 + 1))[:max_chars], "sampling_params": {"max_new_tokens": 1}}
        assert refused(client.post("/generate", json=at), "text", "context length")
        content = "ab " * (max_chars // 3 + 1)
        body = {"model": "default", "max_tokens": 1, "messages": [{"role": "user", "content": content}]}
        assert refused(client.post("/v1/chat/completions", json=body), "messages", "characters at most")
    small.assert_no_leaks()
