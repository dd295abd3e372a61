"""LoRA adapters through sglr-server: `/generate`'s `lora_path` (one name, or one per prompt
with null for the base model) and the OpenAI API's `"model": "base:adapter"`, `"model":
"adapter"` and `lora_path` serve `transformers` + `peft`'s greedy tokens for mixed batches;
`/v1/models` lists the adapters; unknown adapters and models are refused with their statuses."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from lora_support import GREEDY, PROMPTS, LoraSet
from server_harness import Served, served_engine

import sglr as sgl
from sglr.lang.backend.runtime_endpoint import RuntimeEndpoint
from sglr.server import ServerSettings


@pytest.fixture(scope="module")
def served(lora_set: LoraSet) -> Iterator[Served]:
    settings = ServerSettings(allowed_lora_paths=(str(lora_set.root),))
    with served_engine(
        lora_set.base, settings, debug_invariants=True, lora_paths=lora_set.startup_paths()
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=120) as c:
        yield c


def adapter_paths(lora_set: LoraSet) -> dict[str | None, object]:
    return {"sql": lora_set.sql, "chat": lora_set.chat, None: None}


def generate(client: httpx.Client, prompt: list[int], lora_path: str | None) -> dict:
    body = {"input_ids": prompt, "sampling_params": GREEDY, "lora_path": lora_path}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.tp2
def test_a_mixed_native_batch_serves_each_adapters_peft_tokens(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    names = ["sql", None, "chat"]
    body = {"input_ids": PROMPTS, "sampling_params": GREEDY, "lora_path": names}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    paths = adapter_paths(lora_set)
    for prompt, name, out in zip(PROMPTS, names, response.json(), strict=True):
        assert out["output_ids"] == lora_set.expected(paths[name], prompt), name
    # One name for the whole batch; again from the prefix cache, kept apart per adapter.
    both = client.post("/generate", json={**body, "lora_path": "sql"}).json()
    for prompt, out in zip(PROMPTS, both, strict=True):
        assert out["output_ids"] == lora_set.expected(lora_set.sql, prompt)
    assert both[0]["meta_info"]["cached_tokens"] > 0
    served.assert_no_leaks()


@pytest.mark.tp2
def test_openai_model_names_and_lora_path_pick_the_adapter(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    base = served.engine.served_model_name
    native = {name: generate(client, PROMPTS[0], name)["text"] for name in ("sql", "chat", None)}
    assert native["sql"] != native[None] and native["chat"] != native[None]
    common = {
        "prompt": PROMPTS[0],
        "max_tokens": GREEDY["max_new_tokens"],
        "temperature": 0,
        "ignore_eos": True,
    }
    for body, adapter in [
        ({"model": f"{base}:sql"}, "sql"),
        ({"model": "chat"}, "chat"),
        ({"model": base}, None),
        ({"model": "default", "lora_path": "chat"}, "chat"),
        ({"lora_path": "sql"}, "sql"),
        ({"model": "sql", "lora_path": "sql"}, "sql"),
    ]:
        answer = client.post("/v1/completions", json={**common, **body})
        assert answer.status_code == 200, (body, answer.text)
        assert answer.json()["choices"][0]["text"] == native[adapter], body
        assert answer.json()["model"] == body.get("model", base)
    # A batch with one adapter per prompt (SGLang's lora_path list), null for the base model.
    names = ["chat", None, "sql"]
    batch = client.post("/v1/completions", json={**common, "prompt": PROMPTS, "lora_path": names}).json()
    for prompt, name, choice in zip(PROMPTS, names, batch["choices"], strict=True):
        assert choice["text"] == generate(client, prompt, name)["text"], name
    served.assert_no_leaks()


@pytest.mark.tp2
def test_chat_with_an_adapter_model_matches_peft(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    messages = [{"role": "user", "content": "Name a colour."}]
    tokenizer = served.engine.tokenizer
    prompt = tokenizer.encode(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True), add_special_tokens=False
    )
    native = generate(client, prompt, "chat")
    assert native["output_ids"] == lora_set.expected(lora_set.chat, prompt)
    chat = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    reply = chat.chat.completions.create(
        model=f"{served.engine.served_model_name}:chat",
        messages=messages,
        max_tokens=GREEDY["max_new_tokens"],
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert reply.choices[0].message.content == native["text"]
    assert reply.usage.completion_tokens == GREEDY["max_new_tokens"]


def test_models_lists_the_adapters_as_cards_of_the_base(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    base = served.engine.served_model_name
    cards = {card["id"]: card for card in client.get("/v1/models").json()["data"]}
    assert set(cards) == {base, "sql", "chat"}
    assert cards[base]["parent"] is None
    assert cards["sql"]["parent"] == base and cards["sql"]["root"] == str(lora_set.sql)
    assert cards["chat"]["root"] == str(lora_set.chat) and cards["chat"]["object"] == "model"
    assert client.get("/v1/models/chat").json() == cards["chat"]
    assert client.get(f"/v1/models/{base}:sql").json() == cards["sql"]
    assert client.get(f"/v1/models/{base}").json() == cards[base]
    for missing in ("nope", f"{base}:nope", "nope:sql"):
        answer = client.get(f"/v1/models/{missing}")
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "model_not_found", missing


def test_unknown_adapters_and_models_are_refused_naming_them(served: Served, client: httpx.Client) -> None:
    base = served.engine.served_model_name
    native = client.post("/generate", json={"text": "hi", "lora_path": "nope"})
    assert native.status_code == 400
    assert (
        native.json()["error"]["param"] == "lora_path"
        and "'nope' is not loaded" in native.json()["error"]["message"]
    )
    per_prompt = client.post("/generate", json={"text": ["a", "b"], "lora_path": ["sql"]})
    assert per_prompt.status_code == 400 and per_prompt.json()["error"]["param"] == "lora_path"
    for path, body in [
        ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    ]:
        for model in ("nope", f"{base}:nope", "other:sql"):
            answer = client.post(path, json={**body, "model": model})
            error = answer.json()["error"]
            assert answer.status_code == 404, (path, model, answer.text)
            assert error == {
                **error,
                "code": "model_not_found",
                "param": "model",
                "type": "invalid_request_error",
            }
        unknown = client.post(path, json={**body, "lora_path": "nope"})
        assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "lora_path"
        clash = client.post(path, json={**body, "model": "sql", "lora_path": "chat"})
        assert clash.status_code == 400 and clash.json()["error"]["param"] == "lora_path"
    with pytest.raises(openai.NotFoundError) as caught:
        openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0).completions.create(
            model="nope", prompt="hi", max_tokens=2
        )
    assert caught.value.code == "model_not_found"
    served.assert_no_leaks()


@pytest.mark.tp2
def test_runtime_endpoint_sends_the_gen_adapter(served: Served, client: httpx.Client) -> None:
    @sgl.function
    def complete(s, adapter):
        s += "The quick brown fox" + sgl.gen(
            "out", max_tokens=6, temperature=0, ignore_eos=True, lora_path=adapter
        )

    backend = RuntimeEndpoint(served.url)
    try:
        body = {"text": "The quick brown fox", "sampling_params": {**GREEDY, "max_new_tokens": 6}}
        for adapter in ("chat", None):
            expected = client.post("/generate", json={**body, "lora_path": adapter}).json()["text"]
            assert complete.run(adapter=adapter, backend=backend)["out"] == expected, adapter
    finally:
        backend.shutdown()
