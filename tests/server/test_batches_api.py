"""OpenAI's Files and Batch APIs through the official `openai` client: upload, run, poll, read
the output and error files; validation failures, cancel, list, typed errors; a batch resumed by a
second server on the same store, re-running none of the lines the first one finished."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from server_harness import make_engine, serve

from sglr.engine.engine import Engine
from sglr.server import ServerSettings, build_app
from sglr.server.openai.batches.service import BatchService
from sglr.server.state import ServerState

KEY = "sk-batch"
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def engine(tiny_dir: Path) -> Iterator[Engine]:
    engine = make_engine(tiny_dir, debug_invariants=True)
    yield engine
    engine.shutdown()


class Server:
    def __init__(self, url: str, state: ServerState) -> None:
        self.url = url
        self.state = state
        self.service: BatchService = state.batches
        self.client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)


@contextlib.contextmanager
def batch_server(engine: Engine, storage: Path, hook=None, **settings) -> Iterator[Server]:
    """One line at a time: a hook that blocks stops the batch after a known number of lines."""
    settings = ServerSettings(
        api_key=KEY, batch_storage_dir=str(storage), batch_max_concurrency=1, **settings
    )
    app = build_app(engine, settings)
    app.state.sglr.batches.after_line = hook
    with serve(app) as url:
        yield Server(url, app.state.sglr)


@pytest.fixture(scope="module")
def server(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with batch_server(engine, tmp_path_factory.mktemp("batches"), batch_max_file_bytes=20_000) as s:
        yield s


def chat_line(custom_id: str, content: str, **body) -> dict:
    body = {"model": "default", "messages": [{"role": "user", "content": content}], "max_tokens": 3,
            "temperature": 0, **body}  # fmt: skip
    return {"custom_id": custom_id, "method": "POST", "url": CHAT, "body": body}


def upload(server: Server, lines: list[dict | str]) -> str:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    return server.client.files.create(file=("input.jsonl", text.encode()), purpose="batch").id


def wait_for(server: Server, batch_id: str, statuses=("completed", "failed", "cancelled")):
    deadline = time.monotonic() + 60
    while True:
        batch = server.client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.02)


def jsonl(server: Server, file_id: str) -> list[dict]:
    return [json.loads(line) for line in server.client.files.content(file_id).text.splitlines()]


def test_a_chat_batch_answers_each_line_as_the_live_route_does(server: Server) -> None:
    lines = [chat_line(f"q{i}", f"question {i}") for i in range(4)]
    lines.append(chat_line("bad", "x", temperature=9))
    input_id = upload(server, lines)
    created = server.client.batches.create(
        input_file_id=input_id, endpoint=CHAT, completion_window="24h", metadata={"job": "nightly"}
    )
    assert created.status == "validating" and created.metadata == {"job": "nightly"}
    batch = wait_for(server, created.id)
    assert batch.status == "completed" and batch.completed_at is not None
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (
        5,
        4,
        1,
    )
    outputs = {row["custom_id"]: row for row in jsonl(server, batch.output_file_id)}
    assert sorted(outputs) == ["q0", "q1", "q2", "q3"]
    for line in lines[:4]:
        live = httpx.post(server.url + CHAT, json=line["body"], headers={"Authorization": f"Bearer {KEY}"})
        row = outputs[line["custom_id"]]
        assert row["error"] is None and row["response"]["status_code"] == 200
        body = row["response"]["body"]
        assert row["response"]["request_id"] == body["id"] and body["object"] == "chat.completion"
        assert body["choices"][0]["message"] == live.json()["choices"][0]["message"]
    (error_row,) = jsonl(server, batch.error_file_id)
    assert error_row["custom_id"] == "bad" and error_row["response"]["status_code"] == 400
    assert error_row["response"]["body"]["error"]["param"] == "temperature"
    assert server.client.files.retrieve(batch.output_file_id).purpose == "batch_output"
    server.service.check_invariants()


def test_completions_and_embeddings_batches_and_a_streaming_line(server: Server) -> None:
    body = {"model": "default", "prompt": "once upon", "max_tokens": 2, "temperature": 0}
    lines = [{"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": body},
             {"custom_id": "s", "method": "POST", "url": "/v1/completions", "body": {**body, "stream": True}}]  # fmt: skip
    batch = server.client.batches.create(
        input_file_id=upload(server, lines), endpoint="/v1/completions", completion_window="24h"
    )
    batch = wait_for(server, batch.id)
    (row,) = jsonl(server, batch.output_file_id)
    assert row["custom_id"] == "c" and row["response"]["body"]["object"] == "text_completion"
    (streamed,) = jsonl(server, batch.error_file_id)
    assert streamed["response"]["body"]["error"]["param"] == "stream"
    embed = {"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}
    batch = server.client.batches.create(
        input_file_id=upload(server, [embed]), endpoint="/v1/embeddings", completion_window="24h"
    )
    batch = wait_for(server, batch.id)
    (refused,) = jsonl(server, batch.error_file_id)  # a generating server: the route's own 400
    live = httpx.post(
        server.url + "/v1/embeddings", json=embed["body"], headers={"Authorization": f"Bearer {KEY}"}
    )
    assert refused["response"]["status_code"] == live.status_code == 400
    assert refused["response"]["body"] == live.json()


def test_a_bad_input_file_fails_the_batch_with_an_error_per_line(server: Server) -> None:
    lines = [chat_line("a", "x"), chat_line("a", "y"), {**chat_line("b", "x"), "method": "GET"},
             {**chat_line("c", "x"), "url": "/v1/completions"}, {**chat_line("d", "x"), "body": [1]},
             "{not json", chat_line("e", "fine")]  # fmt: skip
    batch = server.client.batches.create(
        input_file_id=upload(server, lines), endpoint=CHAT, completion_window="24h"
    )
    batch = wait_for(server, batch.id)
    assert batch.status == "failed" and batch.failed_at is not None and batch.output_file_id is None
    found = [(e.line, e.code, e.param) for e in batch.errors.data]
    assert found == [(2, "duplicate_custom_id", "custom_id"), (3, "invalid_method", "method"),
                     (4, "mismatched_endpoint", "url"), (5, "invalid_request", "body"),
                     (6, "invalid_json_line", None)]  # fmt: skip


def test_errors_are_typed_and_name_the_field(server: Server) -> None:
    client = server.client
    with pytest.raises(openai.NotFoundError) as unknown:
        client.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
    assert unknown.value.body["param"] == "input_file_id"
    input_id = upload(server, [chat_line("a", "x")])
    for field, body in (("endpoint", {"endpoint": "/generate"}), ("completion_window", {"completion_window": "1h"}),
                        ("metadata.k", {"metadata": {"k": 1}})):  # fmt: skip
        request = {"input_file_id": input_id, "endpoint": CHAT, "completion_window": "24h", **body}
        with pytest.raises(openai.BadRequestError) as bad:
            client.post("/batches", body=request, cast_to=dict)
        assert bad.value.body["param"] == field
    with pytest.raises(openai.BadRequestError) as purpose:
        client.files.create(file=("x.jsonl", b"{}"), purpose="fine-tune")
    assert purpose.value.body["param"] == "purpose"
    with pytest.raises(openai.APIStatusError) as too_big:
        client.files.create(file=("big.jsonl", b"x" * 20_001), purpose="batch")
    assert too_big.value.status_code == 413 and too_big.value.body["param"] == "file"
    for call in (lambda: client.batches.retrieve("batch_nope"), lambda: client.files.retrieve("file-nope"),
                 lambda: client.files.content("file-nope"), lambda: client.batches.cancel("batch_nope")):  # fmt: skip
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).batches.list()


def test_a_full_store_refuses_uploads_until_files_are_deleted(engine: Engine, tmp_path: Path) -> None:
    with batch_server(engine, tmp_path, batch_max_storage_bytes=300) as server:
        kept = server.client.files.create(file=("a.jsonl", b"x" * 200), purpose="batch")
        with pytest.raises(openai.BadRequestError) as full:
            server.client.files.create(file=("b.jsonl", b"x" * 200), purpose="batch")
        assert full.value.body["param"] == "file" and "full" in full.value.body["message"]
        server.client.files.delete(kept.id)
        assert server.client.files.create(file=("b.jsonl", b"x" * 200), purpose="batch").bytes == 200


def test_files_list_retrieve_delete(server: Server) -> None:
    file_id = upload(server, [chat_line("a", "x")])
    listed = [f.id for f in server.client.files.list(purpose="batch")]
    assert file_id == listed[0]  # newest first
    assert server.client.files.retrieve(file_id).filename == "input.jsonl"
    assert server.client.files.delete(file_id).deleted
    assert file_id not in [f.id for f in server.client.files.list()]
    with pytest.raises(openai.NotFoundError):
        server.client.files.retrieve(file_id)
    server.service.check_invariants()


def test_batches_list_pages_newest_first(server: Server) -> None:
    input_id = upload(server, [chat_line("a", "x")])
    ids = [server.client.batches.create(input_file_id=input_id, endpoint=CHAT, completion_window="24h").id
           for _ in range(3)]  # fmt: skip
    first = server.client.batches.list(limit=2)
    assert [b.id for b in first.data] == ids[::-1][:2] and first.has_more
    after = server.client.batches.list(limit=1, after=ids[1])
    assert [b.id for b in after.data] == [ids[0]]
    for batch_id in ids:
        assert wait_for(server, batch_id).status == "completed"
    with pytest.raises(openai.ConflictError):  # finished: nothing to cancel
        server.client.batches.cancel(ids[0])


def blocking_hook(after_num_lines: int, reached: threading.Event):
    """Lets `after_num_lines` lines finish, then holds the only slot until cancelled."""

    async def hook(batch_id: str, num_lines_run: int) -> None:
        if num_lines_run >= after_num_lines:
            reached.set()
            await asyncio.Event().wait()

    return hook


def test_cancel_stops_feeding_lines_and_keeps_what_finished(engine: Engine, tmp_path: Path) -> None:
    reached = threading.Event()
    with batch_server(engine, tmp_path, blocking_hook(1, reached)) as server:
        lines = [chat_line(f"q{i}", f"question {i}") for i in range(5)]
        batch = server.client.batches.create(
            input_file_id=upload(server, lines), endpoint=CHAT, completion_window="24h"
        )
        assert reached.wait(60)
        assert server.client.batches.cancel(batch.id).status in ("cancelling", "cancelled")
        batch = wait_for(server, batch.id)
        assert batch.status == "cancelled" and batch.cancelled_at is not None
        assert (batch.request_counts.total, batch.request_counts.completed) == (5, 1)
        assert [row["custom_id"] for row in jsonl(server, batch.output_file_id)] == ["q0"]
        server.service.check_invariants()


def test_a_restarted_server_resumes_the_batch_with_only_the_pending_lines(
    engine: Engine, tmp_path: Path
) -> None:
    lines = [chat_line(f"q{i}", f"question {i}") for i in range(6)]
    reached = threading.Event()
    with batch_server(engine, tmp_path, blocking_hook(2, reached)) as first:
        batch = first.client.batches.create(
            input_file_id=upload(first, lines), endpoint=CHAT, completion_window="24h"
        )
        assert reached.wait(60)
    with batch_server(engine, tmp_path) as second:
        done = wait_for(second, batch.id)
        assert second.service.runner.num_lines_run == 4  # the first server's two are not re-run
        assert done.status == "completed" and done.request_counts.completed == 6
        assert sorted(row["custom_id"] for row in jsonl(second, done.output_file_id)) == [
            f"q{i}" for i in range(6)
        ]
        second.service.check_invariants()
    engine.check_invariants()


def test_lines_answered_while_the_server_shuts_down_stay_pending(engine: Engine, tmp_path: Path) -> None:
    """A shutdown aborts what runs past its grace period: such answers are not recorded."""
    lines = [chat_line(f"q{i}", f"question {i}") for i in range(3)]
    with batch_server(engine, tmp_path) as first:
        first.state.shutting_down = True
        batch = first.client.batches.create(
            input_file_id=upload(first, lines), endpoint=CHAT, completion_window="24h"
        )
        deadline = time.monotonic() + 60
        while first.service.runner.is_running(batch.id):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        stopped = first.client.batches.retrieve(batch.id)
        assert stopped.status == "in_progress" and stopped.request_counts.completed == 0
    with batch_server(engine, tmp_path) as second:
        assert wait_for(second, batch.id).request_counts.completed == 3
