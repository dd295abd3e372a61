"""`/tokenize` and `/detokenize` (and their `/v1/` spellings) over a real server: round trips
through the engine's tokenizer, batch forms, special tokens, every refusal with its status and
field, the prompt and batch limits, and the API key."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from server_harness import Served, served_engine

from sglr.server import ServerSettings

TEXTS = ["The quick brown fox", "def main():\n    return 1", "héllo wörld ✓"]
KEY = "sk-tokenize-test"
GUARDED = ServerSettings(api_key=KEY, max_sequences_per_request=2, max_body_bytes=65536)
GUARDED_CONTEXT = 32  # prompt text over 32 x longest token x 4 characters is refused untokenized


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def guarded(tiny_dir) -> Iterator[Served]:
    with served_engine(tiny_dir, GUARDED, context_length=GUARDED_CONTEXT) as s:
        yield s


@pytest.mark.parametrize("prefix", ["", "/v1"])
def test_text_to_ids_to_text(served: Served, client: httpx.Client, prefix: str) -> None:
    tokenizer = served.engine.tokenizer
    for text in TEXTS:
        answer = client.post(f"{prefix}/tokenize", json={"prompt": text})
        assert answer.status_code == 200, answer.text
        out = answer.json()
        assert out == {
            "tokens": tokenizer.encode(text),
            "count": len(tokenizer.encode(text)),
            "max_model_len": served.engine.context_len,
        }
        back = client.post(f"{prefix}/detokenize", json={"tokens": out["tokens"]})
        assert back.status_code == 200 and back.json() == {"text": text}


def test_batches_answer_lists_in_order(served: Served, client: httpx.Client) -> None:
    out = client.post("/tokenize", json={"prompt": TEXTS}).json()
    expected = [served.engine.tokenizer.encode(text) for text in TEXTS]
    assert out["tokens"] == expected and out["count"] == [len(ids) for ids in expected]
    assert client.post("/detokenize", json={"tokens": expected}).json() == {"text": TEXTS}
    # One prompt in a list is still a batch, and an empty text tokenizes to no ids.
    single = client.post("/tokenize", json={"prompt": [""]}).json()
    assert single["tokens"] == [served.engine.tokenizer.encode("")] and single["count"] == [
        len(single["tokens"][0])
    ]
    assert client.post("/detokenize", json={"tokens": [[]]}).json() == {"text": [""]}


def test_special_tokens(served: Served, client: httpx.Client) -> None:
    tokenizer = served.engine.tokenizer
    text = "<|im_end|>hi"
    for add in (True, False):
        out = client.post("/tokenize", json={"prompt": text, "add_special_tokens": add}).json()
        assert out["tokens"] == tokenizer.encode(text, add_special_tokens=add)
    # Special tokens stay in the decoded text, so the ids round-trip to the text they came from.
    special = tokenizer.hf.convert_tokens_to_ids("<|im_end|>")
    ids = tokenizer.encode("hi", add_special_tokens=False)
    assert client.post("/detokenize", json={"tokens": [special, *ids]}).json() == {"text": text}


def test_add_special_tokens_reaches_the_tokenizer(served: Served, client: httpx.Client, monkeypatch) -> None:
    # The tiny model's tokenizer adds no BOS, so the flag is checked where it is passed on.
    seen = []
    real = served.engine.tokenizer.encode

    def recording(text: str, add_special_tokens: bool = True) -> list[int]:
        seen.append(add_special_tokens)
        return real(text, add_special_tokens=add_special_tokens)

    monkeypatch.setattr(served.engine.tokenizer, "encode", recording)
    for body in (
        {"prompt": "x"},
        {"prompt": "x", "add_special_tokens": False},
        {"prompt": "x", "add_special_tokens": True},
    ):
        assert client.post("/tokenize", json=body).status_code == 200
    assert seen == [True, False, True]


def test_the_model_field_names_what_is_served(served: Served, client: httpx.Client) -> None:
    engine = served.engine
    for model in (engine.served_model_name, engine.model_path, "default"):
        assert client.post("/tokenize", json={"prompt": "x", "model": model}).status_code == 200
        assert client.post("/detokenize", json={"tokens": [5], "model": model}).status_code == 200
    unknown = client.post("/tokenize", json={"prompt": "x", "model": "no-such-model"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"


BAD_TOKENIZE = [
    ({}, "prompt"),
    ({"prompt": None}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": ["a", 1]}, "prompt"),
    ({"prompt": [["a"]]}, "prompt"),
    ({"prompt": "a\ud800"}, "prompt"),
    ({"prompt": "a", "add_special_tokens": "yes"}, "add_special_tokens"),
    ({"prompt": "a", "model": 3}, "model"),
    ({"prompt": "a", "text": "b"}, "text"),
]
BAD_DETOKENIZE = [
    ({}, "tokens"),
    ({"tokens": "abc"}, "tokens"),
    ({"tokens": 5}, "tokens"),
    ({"tokens": []}, "tokens"),
    ({"tokens": [-1]}, "tokens"),
    ({"tokens": [4096]}, "tokens"),
    ({"tokens": [2**70]}, "tokens"),
    ({"tokens": [1.5]}, "tokens"),
    ({"tokens": [True]}, "tokens"),
    ({"tokens": ["a"]}, "tokens"),
    ({"tokens": [[1], 2]}, "tokens"),
    ({"tokens": [1, [2]]}, "tokens"),
    ({"tokens": [[1], [-5]]}, "tokens"),
    ({"tokens": [1], "prompt": "x"}, "prompt"),
]


@pytest.mark.parametrize(("path", "body", "param"), [
    *(("/tokenize", body, param) for body, param in BAD_TOKENIZE),
    *(("/detokenize", body, param) for body, param in BAD_DETOKENIZE),
])  # fmt: skip
def test_bad_input_is_a_400_naming_the_field(client: httpx.Client, path: str, body: dict, param: str) -> None:
    # Sent as ASCII JSON: a lone surrogate travels as its escape, as a client would send it.
    answer = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert answer.status_code == 400, (body, answer.text)
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error


def test_bodies_that_are_not_json_objects(client: httpx.Client) -> None:
    for path in ("/tokenize", "/detokenize"):
        for content in (b"", b"[1, 2]", b"{not json", b'"text"'):
            answer = client.post(path, content=content, headers={"content-type": "application/json"})
            assert answer.status_code == 400 and answer.json()["error"]["code"] == 400, (path, content)
        assert client.get(path).status_code == 405


def test_the_vocabulary_bound_is_the_tokenizers(served: Served, client: httpx.Client) -> None:
    last = served.engine.tokenizer.vocab_size - 1
    assert client.post("/detokenize", json={"tokens": [last]}).status_code == 200
    refused = client.post("/detokenize", json={"tokens": [last + 1]}).json()["error"]
    assert f"[0, {last}]" in refused["message"]


def test_the_api_key_guards_both_routes(guarded: Served) -> None:
    with httpx.Client(base_url=guarded.url, timeout=60) as client:
        for path in ("/tokenize", "/v1/tokenize", "/detokenize", "/v1/detokenize"):
            body = {"prompt": "x"} if "/tokenize" in path else {"tokens": [1]}
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                assert client.post(path, json=body, headers=headers).status_code == 401, (path, headers)
            allowed = client.post(path, json=body, headers={"Authorization": f"Bearer {KEY}"})
            assert allowed.status_code == 200, (path, allowed.text)


def test_the_limits(guarded: Served) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    longest = guarded.engine.tokenizer.longest_token_chars * GUARDED_CONTEXT * 4
    with httpx.Client(base_url=guarded.url, timeout=60, headers=auth) as client:
        too_long = client.post("/tokenize", json={"prompt": ["x", "a" * (longest + 1)]})
        assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "prompt"
        at_limit = client.post("/tokenize", json={"prompt": "a " * (longest // 2)})
        assert at_limit.status_code == 200 and at_limit.json()["max_model_len"] == GUARDED_CONTEXT
        for path, body in (
            ("/tokenize", {"prompt": ["a", "b", "c"]}),
            ("/detokenize", {"tokens": [[1], [2], [3]]}),
        ):
            over = client.post(path, json=body)
            assert over.status_code == 400 and over.json()["error"]["param"] == next(iter(body)), over.text
        assert client.post("/tokenize", json={"prompt": ["a", "b"]}).status_code == 200
        huge = client.post("/detokenize", json={"tokens": [1] * 40000})
        assert huge.status_code == 413
