"""`/v1/embeddings` and `/encode` on an `--is-embedding` server (and refused on a generating one)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from server_harness import Served, served_engine

from sglr.server import ServerSettings


@pytest.fixture(scope="module")
def embedder(tiny_dir: Path) -> Iterator[Served]:
    with served_engine(tiny_dir, ServerSettings(api_key="k"), is_embedding=True, debug_invariants=True) as s:
        yield s


def post(served: Served, path: str, body: dict, key: str | None = "k") -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(served.url + path, json=body, headers=headers, timeout=60)


def test_v1_embeddings_float_and_base64_match_the_engine(embedder: Served) -> None:
    expected = embedder.engine.encode(["hello world", "abc"])
    reply = post(
        embedder,
        "/v1/embeddings",
        {"input": ["hello world", "abc"], "model": embedder.engine.served_model_name},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert [d["index"] for d in body["data"]] == [0, 1] and body["object"] == "list"
    assert [d["embedding"] for d in body["data"]] == [r["embedding"] for r in expected]
    tokens = sum(r["meta_info"]["prompt_tokens"] for r in expected)
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    alone = embedder.engine.encode("hello world")["embedding"]
    packed = post(embedder, "/v1/embeddings", {"input": "hello world", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    assert decoded.tolist() == np.float32(alone).tolist()
    ids = embedder.engine.tokenizer.encode("hello world")
    by_ids = post(embedder, "/v1/embeddings", {"input": ids, "dimensions": 64}).json()
    assert by_ids["data"][0]["embedding"] == alone
    lists = post(embedder, "/v1/embeddings", {"input": [ids, [5, 6, 7]]}).json()
    assert len(lists["data"]) == 2  # batches round differently: the engine tests bound that
    np.testing.assert_allclose(lists["data"][0]["embedding"], alone, atol=1e-5)


def test_openai_client_embeddings_create(embedder: Served) -> None:
    client = openai.OpenAI(base_url=embedder.url + "/v1", api_key="k", max_retries=0, timeout=60)
    expected = embedder.engine.encode("one two three")["embedding"]
    floats = client.embeddings.create(
        model=embedder.engine.served_model_name, input="one two three", encoding_format="float"
    )
    np.testing.assert_array_equal(floats.data[0].embedding, expected)
    default = client.embeddings.create(
        model=embedder.engine.served_model_name, input=["one two three", "x"]
    )  # base64 on the wire
    # A batch rounds differently from one prompt alone: the engine's answer to the same batch.
    expected_batch = embedder.engine.encode(["one two three", "x"])
    for got, want in zip(default.data, expected_batch, strict=True):
        np.testing.assert_array_equal(got.embedding, np.float32(want["embedding"]))
    assert default.usage.prompt_tokens == default.usage.total_tokens > 0
    embedder.assert_no_leaks()


def test_native_encode(embedder: Served) -> None:
    one = post(embedder, "/encode", {"text": "hello world"}).json()
    assert one["embedding"] == embedder.engine.encode("hello world")["embedding"]
    assert one["meta_info"]["prompt_tokens"] > 0
    many = post(embedder, "/encode", {"input_ids": [[5, 6], [7, 8, 9]], "rid": ["a", "b"]}).json()
    assert [r["meta_info"]["id"] for r in many] == ["a", "b"]
    info = httpx.get(embedder.url + "/model_info", headers={"Authorization": "Bearer k"}).json()
    assert info["is_generation"] is False
    assert (
        httpx.get(embedder.url + "/health_generate", headers={"Authorization": "Bearer k"}).status_code == 200
    )


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/embeddings", {"input": "x", "dimensions": 32}, "dimensions"),
        ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ("/v1/embeddings", {"input": []}, "input"),
        ("/v1/embeddings", {"input": ["x", [1, 2]]}, "input"),
        ("/v1/embeddings", {}, "input"),
        ("/v1/embeddings", {"input": "x", "bogus": 1}, None),
        ("/v1/embeddings", {"input": [10**9]}, None),
        ("/encode", {"text": "x", "input_ids": [1]}, "text"),
        ("/encode", {"text": [1, 2]}, "text"),
        ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2}}, None),
        ("/v1/completions", {"prompt": "x", "max_tokens": 2}, None),
    ],
)
def test_refusals_are_400s(embedder: Served, path: str, body: dict, param: str | None) -> None:
    reply = post(embedder, path, body)
    assert reply.status_code == 400, reply.text
    if param is not None:
        assert reply.json()["error"]["param"] == param


def test_auth_and_generation_server_refusal(embedder: Served, tiny_dir: Path) -> None:
    assert post(embedder, "/v1/embeddings", {"input": "x"}, key=None).status_code == 401
    with served_engine(tiny_dir) as generating:
        for path, body in (("/v1/embeddings", {"input": "x"}), ("/encode", {"text": "x"})):
            reply = post(generating, path, body, key=None)
            assert reply.status_code == 400 and "is_embedding" in reply.json()["error"]["message"]
