"""API key (constant-time Bearer check; health and metrics exempt) and the body size limit."""

from __future__ import annotations

import httpx
import openai
import pytest
from server_harness import Served, served_engine

from sglr.server import ServerSettings

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def guarded(tiny_dir):
    settings = ServerSettings(api_key=KEY, enable_metrics=True, max_body_bytes=4096)
    with served_engine(tiny_dir, settings) as served:
        yield served


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
