"""LoRA adapters through sglr-router: the adapter a body names (`lora_path`, or `"model":
"base:adapter"` on the OpenAI routes) joins its routing key, so one adapter's prefixes go to the
replica that cached them and never count as the base's; bodies pass through unchanged; and
`/load_lora_adapter` / `/unload_lora_adapter` go to every worker, answering the first error;
`/tokenize`, `/detokenize`, `/encode` and `/v1/embeddings` pass through to one worker."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from in_process_router import InProcessRouter

from sglr.engine.engine import Engine
from sglr.http.background import serve_in_background
from sglr.router import Router, RouterConfig
from sglr.router.keys import routing_key, scan_ids_request, with_adapter
from sglr.server import ServerSettings, build_app
from sglr.testing.tiny_lora import write_peft_adapter

PROMPT = [1000 + k for k in range(48)]
GREEDY = {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}


def test_the_adapter_joins_the_routing_key() -> None:
    text, ids = "Shared system prompt", array("I", PROMPT)
    assert routing_key("/generate", {"text": text}) == text
    assert routing_key("/generate", {"text": text, "lora_path": None}) == text
    assert routing_key("/generate", {"text": text, "lora_path": "a"}) == with_adapter(text, "a")
    assert routing_key("/generate", {"text": [text, "x"], "lora_path": ["a", None]}) == with_adapter(
        text, "a"
    )
    assert routing_key("/generate", {"input_ids": PROMPT, "lora_path": "a"}) == with_adapter(ids, "a")
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    for body in (
        {"model": "base:a"},
        {"model": "x:y:a"},
        {"lora_path": "a"},
        {"model": "base", "lora_path": "a"},
    ):
        assert routing_key("/v1/chat/completions", {**chat, **body}) == with_adapter("user\nhi\n", "a"), body
        assert routing_key("/v1/completions", {"prompt": PROMPT, **body}) == with_adapter(ids, "a"), body
    # A bare model name could be the base's: it keys as the base's.
    assert routing_key("/v1/completions", {"prompt": PROMPT, "model": "a"}) == ids
    assert routing_key("/generate", {"text": text, "model": "base:a"}) == text  # no model natively
    keyed = with_adapter(ids, "a")
    assert list(keyed[2:]) == PROMPT and all(id >= 2**31 for id in keyed[:2])
    assert with_adapter(ids, "b")[:2] != keyed[:2] and with_adapter(PROMPT, "a") == list(keyed)
    assert with_adapter(text, "a") != with_adapter(text, "b") != text


@pytest.mark.parametrize(
    ("path", "tail", "scanned"),
    [
        ("/generate", "", True),
        ("/generate", ', "lora_path": "a"', False),
        ("/generate", ', "lora_path": null', False),
        ("/v1/completions", ', "model": "base"', True),
        ("/v1/completions", ', "model": "base:a"', False),
        ("/v1/completions", ', "model": "b\\u0061se:a"', False),
        ("/v1/completions", ', "user": "model", "model": "x"', True),
    ],
)
def test_the_raw_scan_leaves_bodies_naming_adapters_to_the_parse(path: str, tail: str, scanned: bool) -> None:
    field = "prompt" if path == "/v1/completions" else "input_ids"
    body = f'{{"{field}": {PROMPT}{tail}}}'.encode()
    result = scan_ids_request(path, body)
    assert (result is not None) == scanned
    if result is not None:
        assert list(result[0]) == list(routing_key(path, httpx.Response(200, content=body).json()))


def test_one_adapters_prefixes_go_to_the_replica_that_cached_them() -> None:
    router = Router([0, 1], RouterConfig(policy="cache-aware"))

    def route(body: dict) -> int:
        replica = router.route(routing_key("/generate", body))
        router.finish(replica)
        return replica

    base = route({"input_ids": PROMPT})
    # Keyed as the base's, this would match the base's prefix in full and follow it there.
    adapter = route({"input_ids": PROMPT, "lora_path": "a"})
    assert adapter != base
    for suffix in range(5):
        assert route({"input_ids": [*PROMPT, suffix], "lora_path": "a"}) == adapter
        assert route({"input_ids": [*PROMPT, suffix]}) == base


# -- through a router in front of two sglr-servers ------------------------------------------------


class RouterOverWorkers(InProcessRouter):
    """Two workers (sglr-server apps over in-process engines) and a router in front of them."""

    def __init__(self, engines: list[Engine], worker_urls: list[str]) -> None:
        self.engines = engines
        self.worker_urls = worker_urls
        super().__init__(worker_urls, name="lora-router")


@pytest.fixture(scope="module")
def adapters(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("router-lora")
    return {
        "first": write_peft_adapter(
            tiny_dir, root / "first", rank=4, target_modules=("q_proj", "v_proj"), seed=31
        ),
        "second": write_peft_adapter(tiny_dir, root / "second", rank=4, target_modules=("up_proj",), seed=32),
    }


@pytest.fixture(scope="module")
def stack(tiny_dir: Path, adapters: dict[str, Path]) -> Iterator[RouterOverWorkers]:
    settings = ServerSettings(allowed_lora_paths=(str(adapters["first"].parent),))
    engines = [
        Engine(
            model_path=str(tiny_dir),
            device="cpu",
            max_total_tokens=8192,
            enable_lora=True,
            debug_invariants=True,
        )
        for _ in range(2)
    ]
    try:
        with (
            serve_in_background(build_app(engines[0], settings), timeout_graceful_shutdown=5) as first,
            serve_in_background(build_app(engines[1], settings), timeout_graceful_shutdown=5) as second,
        ):
            stack = RouterOverWorkers(engines, [first, second])
            try:
                yield stack
            finally:
                stack.close()
    finally:
        for engine in engines:
            engine.shutdown()


def test_loads_and_unloads_reach_every_worker(stack: RouterOverWorkers, adapters: dict[str, Path]) -> None:
    with httpx.Client(base_url=stack.url, timeout=120) as client:
        loaded = client.post(
            "/load_lora_adapter", json={"lora_name": "first", "lora_path": str(adapters["first"])}
        )
        assert loaded.status_code == 200, loaded.text
        assert loaded.json()["loaded_adapters"] == {"first": str(adapters["first"])}
        assert loaded.json()["workers"] == dict.fromkeys(stack.worker_urls, 200)
        assert [[ref.name for ref in engine.lora_adapters()] for engine in stack.engines] == [
            ["first"],
            ["first"],
        ]
        # Bodies pass through unchanged: the adapter's tokens, whichever worker serves them.
        body = {"input_ids": PROMPT, "sampling_params": GREEDY, "lora_path": "first"}
        direct = stack.engines[0].generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="first")
        routed = client.post("/generate", json=body)
        assert routed.json()["output_ids"] == direct["output_ids"]
        chat = {"model": "default:first", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert client.post("/v1/chat/completions", json=chat).status_code == 200
        unloaded = client.post("/unload_lora_adapter", json={"lora_name": "first"})
        assert unloaded.status_code == 200 and unloaded.json()["loaded_adapters"] == {}
        assert all(engine.lora_adapters() == [] for engine in stack.engines)
        assert client.post("/generate", json=body).status_code == 400


def test_a_broadcast_answers_the_first_error(stack: RouterOverWorkers, adapters: dict[str, Path]) -> None:
    later = stack.worker_urls[1]
    stack.engines[1].load_lora_adapter("second", str(adapters["second"]))  # taken on one worker only
    try:
        with httpx.Client(base_url=stack.url, timeout=120) as client:
            body = {"lora_name": "second", "lora_path": str(adapters["second"])}
            answer = client.post("/load_lora_adapter", json=body)
            assert answer.status_code == 400 and "already loaded" in answer.json()["error"]["message"]
            assert answer.json()["workers"] == {stack.worker_urls[0]: 200, later: 400}
            outside = client.post(
                "/load_lora_adapter", json={"lora_name": "x", "lora_path": str(stack.engines[0].model_path)}
            )
            assert outside.status_code == 400 and outside.json()["error"]["param"] == "lora_path"
            assert client.post("/unload_lora_adapter", json={"lora_name": "second"}).status_code == 200
            missing = client.post("/unload_lora_adapter", json={"lora_name": "second"})
            assert missing.status_code == 404 and missing.json()["error"]["param"] == "lora_name"
            assert missing.json()["workers"] == dict.fromkeys(stack.worker_urls, 404)
    finally:
        for engine in stack.engines:
            if any(ref.name == "second" for ref in engine.lora_adapters()):
                engine.unload_lora_adapter("second")


def test_tokenize_and_detokenize_pass_through(stack: RouterOverWorkers) -> None:
    tokenizer = stack.engines[0].tokenizer
    with httpx.Client(base_url=stack.url, timeout=120) as client:
        for prefix in ("", "/v1"):
            out = client.post(f"{prefix}/tokenize", json={"prompt": ["hi there", "x"]})
            assert out.status_code == 200 and out.json()["tokens"] == [
                tokenizer.encode("hi there"),
                tokenizer.encode("x"),
            ]
            back = client.post(f"{prefix}/detokenize", json={"tokens": out.json()["tokens"]})
            assert back.json() == {"text": ["hi there", "x"]}
            refused = client.post(f"{prefix}/detokenize", json={"tokens": [-1]})
            assert refused.status_code == 400 and refused.json()["error"]["param"] == "tokens"


def test_embedding_routes_pass_through(stack: RouterOverWorkers) -> None:
    """The workers generate, so each refuses embeddings: the router hands back that answer
    (its own 404 would mean the route never reached a worker)."""
    with httpx.Client(timeout=120) as client:
        for path, body in (("/v1/embeddings", {"input": "hi"}), ("/encode", {"text": "hi"})):
            direct = client.post(stack.worker_urls[0] + path, json=body)
            routed = client.post(stack.url + path, json=body)
            assert direct.status_code == 400, direct.text
            assert (routed.status_code, routed.json()) == (direct.status_code, direct.json())
