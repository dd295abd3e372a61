"""`/v1/responses*`, `/v1/files*` and `/v1/batches*` through sglr-router: every request goes to
the first healthy worker, so what one request stores the next finds (two sglr-server apps over
tiny engines, each with its own stores)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from in_process_router import InProcessRouter

from sglr.engine.engine import Engine
from sglr.http.background import serve_in_background
from sglr.router.proxy import WORKER_HEADER
from sglr.server import build_app


class _Stack(InProcessRouter):
    def __init__(self, worker_urls: list[str]) -> None:
        self.worker_urls = worker_urls
        super().__init__(worker_urls, name="pinned-router")


@pytest.fixture(scope="module")
def stack(tiny_dir: Path) -> Iterator[_Stack]:
    engines = [Engine(model_path=str(tiny_dir), device="cpu", max_total_tokens=2048) for _ in range(2)]
    try:
        with (
            serve_in_background(build_app(engines[0]), timeout_graceful_shutdown=5) as first,
            serve_in_background(build_app(engines[1]), timeout_graceful_shutdown=5) as second,
        ):
            stack = _Stack([first, second])
            try:
                yield stack
            finally:
                stack.close()
    finally:
        for engine in engines:
            engine.shutdown()


BODY = {"input": "Name a city.", "max_output_tokens": 4, "temperature": 0}


def test_a_response_created_through_the_router_is_found_through_it(stack: _Stack) -> None:
    first, second = stack.worker_urls
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        created = client.post("/v1/responses", json=BODY)
        assert created.status_code == 200, created.text
        assert created.headers[WORKER_HEADER] == first
        response_id = created.json()["id"]
        for _ in range(3):  # a rotating choice of worker would miss it on some of these
            found = client.get(f"/v1/responses/{response_id}")
            assert found.status_code == 200 and found.json()["output"] == created.json()["output"]
        items = client.get(f"/v1/responses/{response_id}/input_items")
        assert items.status_code == 200 and items.json()["data"]
        assert httpx.get(f"{second}/v1/responses/{response_id}").status_code == 404  # one replica holds it
        with client.stream("POST", "/v1/responses", json={**BODY, "stream": True}) as streamed:
            assert streamed.headers[WORKER_HEADER] == first
            lines = [line for line in streamed.iter_lines() if line.startswith("data: {")]
        last = json.loads(lines[-1].removeprefix("data: "))
        assert last["type"] in ("response.completed", "response.incomplete")
        assert client.get(f"/v1/responses/{last['response']['id']}").status_code == 200
        assert client.delete(f"/v1/responses/{response_id}").status_code == 200
        assert client.get(f"/v1/responses/{response_id}").status_code == 404


def test_files_and_batches_stay_on_one_worker(stack: _Stack) -> None:
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        files = {"file": ("input.jsonl", json.dumps(line).encode() + b"\n")}
        uploaded = client.post("/v1/files", data={"purpose": "batch"}, files=files)
        assert uploaded.status_code == 200, uploaded.text
        file_id = uploaded.json()["id"]
        for _ in range(3):
            assert client.get(f"/v1/files/{file_id}/content").content == json.dumps(line).encode() + b"\n"
        assert file_id in [f["id"] for f in client.get("/v1/files").json()["data"]]
        batch = client.post(
            "/v1/batches",
            json={"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        )
        assert batch.status_code == 200, batch.text
        assert client.get(f"/v1/batches/{batch.json()['id']}").json()["input_file_id"] == file_id
        assert client.delete(f"/v1/files/{file_id}").status_code == 200
        assert client.get(f"/v1/files/{file_id}").status_code == 404
