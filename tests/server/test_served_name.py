"""The default served-model name is the checkpoint's readable name (`checkpoint_name`), not a
path: on `/v1/models`, `/model_info` and in responses; `--served-model-name` overrides it, and a
request may name the model by either its served name or its path (the old default name)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_harness import Served, served_engine

from sglr.engine.engine import Engine
from sglr.model.default_model import DEFAULT_MODEL_FILE, DEFAULT_MODEL_NAME, checkpoint_name
from sglr.model.gguf.cache import converted_dir


def _gguf(path: Path) -> Path:
    path.write_bytes(b"GGUF")
    return path


def test_checkpoint_names(tmp_path: Path) -> None:
    assert checkpoint_name(None) == DEFAULT_MODEL_NAME == "SmolLM2-135M-Instruct"
    for file, name in (
        (DEFAULT_MODEL_FILE, "SmolLM2-135M-Instruct"),
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Llama-3.2-1B-Instruct"),
        ("qwen2.5-0.5b-instruct-q8_0.gguf", "qwen2.5-0.5b-instruct"),
        ("phi.IQ2_XS.gguf", "phi"),
        ("tiny.F16.gguf", "tiny"),
        ("plain.gguf", "plain"),
    ):
        assert checkpoint_name(_gguf(tmp_path / file)) == name, file
    # The cache directory a GGUF file converts to (the old default name of the embedded model).
    source = _gguf(tmp_path / DEFAULT_MODEL_FILE)
    converted = converted_dir(source, "bfloat16", cache_dir=tmp_path / "cache")
    converted.mkdir(parents=True)
    assert converted.name.startswith("SmolLM2-135M-Instruct.Q4_1-bfloat16-")
    assert checkpoint_name(converted) == checkpoint_name(str(converted) + "/") == "SmolLM2-135M-Instruct"
    # A directory of the user's keeps its name as it is; a path that names nothing here (a Hub
    # id) is its own name.
    (tmp_path / "my-model-f16").mkdir()
    assert checkpoint_name(tmp_path / "my-model-f16") == "my-model-f16"
    assert checkpoint_name("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB/SmolLM2-135M"


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


def test_the_served_name_is_the_directory_name(served: Served, tiny_dir: Path, client: httpx.Client) -> None:
    name = tiny_dir.name
    assert served.engine.served_model_name == name and served.engine.model_path == str(tiny_dir)
    cards = client.get("/v1/models").json()["data"]
    assert [card["id"] for card in cards] == [name] and cards[0]["root"] == str(tiny_dir)
    assert client.get(f"/v1/models/{name}").json()["id"] == name
    info = client.get("/model_info").json()
    assert info["served_model_name"] == name and info["model_path"] == str(tiny_dir)


def test_requests_name_the_model_by_name_or_path(tiny_dir: Path, client: httpx.Client) -> None:
    body = {"prompt": "hi", "max_tokens": 2, "temperature": 0}
    assert client.post("/v1/completions", json=body).json()["model"] == tiny_dir.name
    for model in (tiny_dir.name, str(tiny_dir)):
        answer = client.post("/v1/completions", json={**body, "model": model})
        assert answer.status_code == 200 and answer.json()["model"] == model, answer.text
        chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert client.post("/v1/chat/completions", json=chat).status_code == 200
    assert client.get(f"/v1/models/{tiny_dir}").json()["id"] == tiny_dir.name


def test_served_model_name_overrides(tiny_dir: Path) -> None:
    with (
        served_engine(tiny_dir, served_model_name="custom-name") as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        assert [card["id"] for card in client.get("/v1/models").json()["data"]] == ["custom-name"]
        body = {"prompt": "hi", "max_tokens": 2}
        assert client.post("/v1/completions", json=body).json()["model"] == "custom-name"
        for model in ("custom-name", str(tiny_dir), "default"):
            assert client.post("/v1/completions", json={**body, "model": model}).status_code == 200
        refused = client.post("/v1/completions", json={**body, "model": tiny_dir.name})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found"


def test_a_gguf_file_serves_as_its_name(tiny_dir: Path, tmp_path: Path) -> None:
    from sglr.testing.tiny_gguf import write_quantized_gguf

    path = write_quantized_gguf(tiny_dir, tmp_path / "Tiny-Llama-Q8_0.gguf", "Q8_0")
    engine = Engine(model_path=str(path), device="cpu", max_total_tokens=2048)
    try:
        assert engine.served_model_name == "Tiny-Llama" and engine.model_path == str(path)
        # An engine around the loaded runner names its converted directory: the same name.
        around = Engine.from_runner(engine.runner)
        try:
            assert around.served_model_name == "Tiny-Llama"
        finally:
            around.shutdown()
    finally:
        engine.shutdown()
