"""`sglr-router`'s fast path (`sglr.router`'s `server` / `front` / `proxy` / `upstream`)
against scripted workers: streams relayed chunk by chunk, a worker that
dies mid-stream or before replying, keep-alive reuse of worker connections (and a retry when
a reused one turns out closed), a client that leaves mid-stream, malformed HTTP, pipelining
and auth. The router runs in this process on its own event loop thread; the workers are small
asyncio servers on the same loop whose answer the request body's "text" picks."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglr.router import RouterConfig
from sglr.router.admin import build_router_app
from sglr.router.keys import routing_key, scan_ids_request
from sglr.router.proxy import read_json_body
from sglr.router.server import serve_router
from sglr.router.state import RouterSettings
from sglr.router.upstream import WorkerConnections
from sglr.router.workers import WorkerPool
from sse_client import parse_sse


@dataclass
class ScriptedWorker:
    name: str
    url: str = ""
    num_connections: int = 0
    num_requests: int = 0
    # Set by the test to let a held stream go on.
    release: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when a stream's client (the router) closed the connection.
    saw_disconnect: threading.Event = field(default_factory=threading.Event)
    server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.num_connections += 1
        requests_here = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.num_requests += 1
                requests_here += 1
                if head.startswith(b"GET /health"):
                    _reply(writer, 200, b"{}")
                    continue
                if not await self._answer(_text(body), requests_here, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, text: str, requests_here: int, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection is done."""
        if text == "close-before-reply" or (text == "close-when-reused" and requests_here > 1):
            writer.transport.abort()
            return False
        if text.startswith("stream"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
            _chunk(writer, b'data: {"n": 1}\n\n')
            await writer.drain()
            if text == "stream-die":
                _chunk(writer, b'data: {"n": ')  # half an event, then the worker dies
                await writer.drain()
                writer.transport.abort()
                return False
            if text == "stream-held":
                await self.release.wait()
            if text == "stream-forever":
                await _wait_for_close(writer, self.saw_disconnect)
                return False
            _chunk(writer, b'data: {"n": 2}\n\n')
            _chunk(writer, b"data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        if text == "hang":
            await self.release.wait()
            return False
        if text == "shutting-down":
            _reply(writer, 503, json.dumps({"error": {"message": "shutting down"}}).encode())
            return True
        _reply(writer, 200, json.dumps({"text": text, "worker": self.name}).encode())
        await writer.drain()
        return True


def _text(body: bytes) -> str:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return "not-json"
    return payload.get("text", "") if isinstance(payload, dict) else ""


def _reply(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b"
                 % (status, len(body), body))  # fmt: skip


def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(b"%x\r\n%b\r\n" % (len(data), data))


async def _wait_for_close(writer: asyncio.StreamWriter, seen: threading.Event) -> None:
    while not writer.transport.is_closing():
        try:
            _chunk(writer, b": keep-alive\n\n")
            await writer.drain()
        except ConnectionError:
            break
        await asyncio.sleep(0.01)
    seen.set()


class Harness:
    """A router over scripted workers, on an event loop in a background thread."""

    def __init__(self, num_workers: int = 2, **settings: object) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.workers = [ScriptedWorker(f"w{i}") for i in range(num_workers)]
        for worker in self.workers:
            self.call(worker.start())
        self.pool = WorkerPool([w.url for w in self.workers], RouterConfig(policy="round-robin"))
        settings = {"health_check_interval_s": 3600.0, **settings}
        self.app = build_router_app(self.pool, RouterSettings(**settings))  # type: ignore[arg-type]
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        ready = threading.Event()
        self.stopping = self.call(_make_event())
        self.served = asyncio.run_coroutine_threadsafe(
            serve_router(self.app, sock, shutdown_timeout_s=2, on_ready=ready.set, stopping=self.stopping),
            self.loop,
        )
        assert ready.wait(30)

    def call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def worker_state(self, name: str) -> dict:
        worker = next(w for w in self.workers if w.name == name)
        return {w["url"]: w for w in httpx.get(self.url + "/list_workers").json()["workers"]}[worker.url]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.served.result(30)
        self.call(_stop_workers(self.workers))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


async def _stop_workers(workers: list[ScriptedWorker]) -> None:
    for worker in workers:
        assert worker.server is not None
        worker.server.close()
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def _make_event() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    try:
        yield h
    finally:
        h.close()


def generate(client: httpx.Client, text: str, stream: bool = False) -> httpx.Response:
    return client.post("/generate", json={"text": text, "stream": stream})


def test_buffered_requests_reuse_one_connection_per_worker(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        answers = [generate(client, f"q{i}") for i in range(10)]
    assert all(a.status_code == 200 for a in answers)
    assert {a.json()["worker"] for a in answers} == {"w0", "w1"}  # round-robin
    assert all(a.headers["x-sglr-worker"] in {w.url for w in harness.workers} for a in answers)
    # Ten requests, one kept-alive connection per worker.
    assert [w.num_connections for w in harness.workers] == [1, 1]
    assert sum(w.num_requests for w in harness.workers) == 10


def test_a_stream_is_relayed_as_the_worker_writes_it(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        # Two requests so one of them lands on each worker (round-robin); both hold.
        with client.stream("POST", "/generate", json={"text": "stream-held", "stream": True}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            chunks = response.iter_raw()
            # The first event arrives while the worker still holds the rest back.
            assert next(chunks).startswith(b'data: {"n": 1}')
            for worker in harness.workers:
                harness.loop.call_soon_threadsafe(worker.release.set)
            rest = b"".join(chunks)
        events = parse_sse('data: {"n": 1}\n\n' + rest.decode())
    assert [e["n"] for e in events] == [1, 2]


def test_a_worker_dying_mid_stream_ends_that_stream_with_an_error(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        died = generate(client, "stream-die", stream=True)
        assert died.status_code == 200
        raw = died.text
        victim = died.headers["x-sglr-worker"]
        # The half-sent event is closed off, so the error arrives as an event of its own.
        events = raw.split("\n\n")
        assert events[:2] == ['data: {"n": 1}', 'data: {"n": '] and events[-2:] == ["data: [DONE]", ""]
        error = json.loads(events[2].removeprefix("data: "))["error"]
        assert error["code"] == 502 and victim in error["message"]
        # The other worker serves everything after; the dead one left routing.
        after = [generate(client, f"after {i}") for i in range(3)]
        assert all(a.status_code == 200 and a.headers["x-sglr-worker"] != victim for a in after)
        listed = {w["url"]: w for w in client.get("/list_workers").json()["workers"]}
        assert not listed[victim]["healthy"] and listed[victim]["num_failed"] == 1
        assert all(w["num_in_flight"] == 0 for w in listed.values())
        assert (
            f'sglr_router:requests_total{{outcome="failed",worker="{victim}"}} 1.0'
            in client.get("/metrics").text
        )


def test_a_request_nothing_answered_goes_to_another_worker(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        answer = generate(client, "close-before-reply")
        # Every worker closes on this text: each is tried once, then a 502 names them all.
        assert answer.status_code == 502
        message = answer.json()["error"]["message"]
        assert all(w.url in message for w in harness.workers)
        assert generate(client, "x").status_code == 503  # none is left healthy
    assert 'outcome="retried"' in httpx.get(harness.url + "/metrics").text


def test_503_from_a_shutting_down_worker_is_retried_elsewhere() -> None:
    harness = Harness(max_retries=0)
    try:
        with httpx.Client(base_url=harness.url, timeout=30) as client:
            answer = generate(client, "shutting-down")
            assert answer.status_code == 502 and "answered 503" in answer.text
            assert sum(not w["healthy"] for w in client.get("/list_workers").json()["workers"]) == 1
    finally:
        harness.close()


def test_a_reused_connection_closed_by_the_worker_is_retried_on_a_new_one(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        first = generate(client, "close-when-reused")
        worker = first.headers["x-sglr-worker"]
        generate(client, "other")  # round-robin: the next one lands on the other worker
        # Back on the first worker: its kept connection is dropped unanswered, as when a
        # worker closes an idle connection just as a request goes out.
        again = generate(client, "close-when-reused")
        assert again.status_code == 200 and again.headers["x-sglr-worker"] == worker
        listed = {w["url"]: w for w in client.get("/list_workers").json()["workers"]}
    assert listed[worker]["healthy"] and listed[worker]["num_failed"] == 0
    assert next(w for w in harness.workers if w.url == worker).num_connections == 2


def test_a_client_leaving_mid_stream_closes_the_worker_connection(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        with client.stream("POST", "/generate", json={"text": "stream-forever", "stream": True}) as response:
            worker_url = response.headers["x-sglr-worker"]
            next(response.iter_raw())
        worker = next(w for w in harness.workers if w.url == worker_url)
        assert worker.saw_disconnect.wait(30)
        listed = {w["url"]: w for w in client.get("/list_workers").json()["workers"]}
        assert listed[worker_url]["healthy"] and listed[worker_url]["num_in_flight"] == 0
        metrics = client.get("/metrics").text
    assert f'sglr_router:requests_total{{outcome="client_left",worker="{worker_url}"}} 1.0' in metrics


def _raw_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_malformed_http_gets_400_and_the_router_keeps_serving(harness: Harness) -> None:
    upgrade = b"POST /generate HTTP/1.1\r\nconnection: upgrade\r\nupgrade: h2c\r\ncontent-length: 2\r\n\r\n{}"
    for garbage in (
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /generate HTTP/1.1\r\ncontent-length: x\r\n\r\n",
        upgrade,
    ):
        answer = _raw_exchange(harness.port, garbage)
        assert answer.startswith(b"HTTP/1.1 400 "), answer
        assert b"connection: close" in answer
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == 400
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        # Bodies the router cannot read still go to a worker, which answers them.
        for body in (b"{not json", b"[" * 100_000, b"\xff\xfe"):
            answer = client.post("/generate", content=body)
            assert answer.status_code == 200 and answer.json()["text"] == "not-json"
        assert generate(client, "still here").json()["text"] == "still here"


def test_pipelined_requests_are_answered_in_order(harness: Harness) -> None:
    bodies = [json.dumps({"text": f"p{i}"}).encode() for i in range(3)]
    requests = b"".join(
        b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n%b\r\n%b" % (len(body), b"connection: close\r\n" if i == 2 else b"", body)
        for i, body in enumerate(bodies)
    )
    answer = _raw_exchange(harness.port, requests)
    texts = [
        json.loads(part.split(b"\r\n\r\n", 1)[1])["text"] for part in answer.split(b"HTTP/1.1 200 OK")[1:]
    ]
    assert texts == ["p0", "p1", "p2"]


def test_pipelined_requests_of_every_handler_kind_are_answered_in_order(harness: Harness) -> None:
    # Forwarded from callbacks, answered at once (405), run as a coroutine (the admin app),
    # forwarded again: each waits for the one before it.
    def post(text: str) -> bytes:
        body = json.dumps({"text": text}).encode()
        return b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)

    requests = (post("first") + b"GET /generate HTTP/1.1\r\nhost: x\r\n\r\n"
                + b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
                + post("last").replace(b"host: x\r\n", b"host: x\r\nconnection: close\r\n"))  # fmt: skip
    answer = _raw_exchange(harness.port, requests)
    assert [int(status) for status in re.findall(rb"HTTP/1.1 (\d{3}) ", answer)] == [200, 405, 200, 200]
    assert answer.index(b'"first"') < answer.index(b"num_healthy_workers") < answer.index(b'"last"')


def test_a_request_no_worker_can_take_is_answered_before_the_next_one(harness: Harness) -> None:
    for worker in harness.workers:
        harness.pool.remove_worker(worker.url)
    requests = b"".join(
        b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n%b\r\n{}"
        % (b"connection: close\r\n" if last else b"")
        for last in (False, False, True)
    )
    answer = _raw_exchange(harness.port, requests)
    assert re.findall(rb"HTTP/1.1 (\d{3}) ", answer) == [b"503"] * 3


def test_an_error_inside_the_router_gets_500_and_the_router_keeps_serving(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = harness.pool.route

    def broken_route(key: object) -> object:
        monkeypatch.setattr(harness.pool, "route", route)  # only this once
        raise RuntimeError("routing bug")

    monkeypatch.setattr(harness.pool, "route", broken_route)
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        failed = generate(client, "x")
        assert failed.status_code == 500 and failed.headers["connection"] == "close"
        assert generate(client, "y").json()["text"] == "y"


def test_route_times_are_a_prometheus_histogram(harness: Harness) -> None:
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        started = time.perf_counter()
        for i in range(5):
            generate(client, f"q{i}")
        seconds = time.perf_counter() - started
        metrics = client.get("/metrics").text
    samples = dict(
        line.rsplit(" ", 1) for line in metrics.splitlines() if line.startswith("sglr_router:route_seconds")
    )
    assert float(samples["sglr_router:route_seconds_count"]) == 5
    buckets = [float(value) for name, value in samples.items() if "_bucket{" in name]
    assert buckets == sorted(buckets) and buckets[-1] == 5
    assert samples['sglr_router:route_seconds_bucket{le="+Inf"}'] == "5.0"
    # Routing is a part of each request: its time, within the requests' own.
    assert 0 < float(samples["sglr_router:route_seconds_sum"]) <= seconds


def test_a_worker_request_is_its_head_then_the_body_byte_for_byte() -> None:
    connections = WorkerConnections("http://10.0.0.1:30001/base", connect_timeout_s=1.0)
    body = b'{"text": "x"}'
    for key in range(100):  # one kept head per API key, bounded
        headers = ((b"content-type", b"application/json"), (b"authorization", b"Bearer k%d" % key))
        request = connections.post(b"/generate", headers, body)
        assert request == (
            b"POST /base/generate HTTP/1.1\r\nhost: 10.0.0.1:30001\r\ncontent-type: application/json\r\n"
            b"authorization: Bearer k%d\r\ncontent-length: %d\r\n\r\n%b" % (key, len(body), body)
        )
        assert connections.post(b"/generate", headers, b"").endswith(b"content-length: 0\r\n\r\n")
    assert len(connections._heads) <= 64


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "a", "stream": true}',
        '{"text": "\u00e9"}'.encode(),
        '\ufeff{"a": 1}'.encode(),
        '{"a": [1, 2]}'.encode("utf-16"),
        '{"a": 1}'.encode("utf-16-le"),
        '{"a": 1}'.encode("utf-32"),
        b"{not json",
        b"\xff\xfe",
        b"",
        b"[" * 100_000,
        b" [1, 2] ",
        b"[1, 2] x",
        b'{"a": 1}\x0c',
        b'"\\ud800"',
        b"NaN",
    ],
)
def test_the_body_is_read_as_json_loads_reads_it(body: bytes) -> None:
    try:
        expected = json.loads(body)
    except (ValueError, RecursionError):
        expected = None
    got = read_json_body(body)
    assert got == expected or (got != got and expected != expected)  # NaN


_ID_VALUES = st.one_of(
    st.integers(0, 50_000),
    st.integers(-3, 2**32 + 3),
    st.booleans(),
    st.floats(allow_nan=False),
    st.text(max_size=2),
    st.lists(st.integers(0, 9), max_size=2),
)
_PATHS = ["/generate", "/v1/completions", "/v1/chat/completions"]


def _parsed_route(path: str, body: bytes) -> tuple[object, bool]:
    payload = read_json_body(body)
    return routing_key(path, payload), isinstance(payload, dict) and payload.get("stream") is True


@given(
    path=st.sampled_from(_PATHS),
    ids=st.one_of(st.none(), st.just("text"), st.lists(_ID_VALUES, max_size=12), st.lists(st.integers(0, 2**32 - 1), max_size=40)),
    stream=st.sampled_from([None, True, False, 1, "true"]),
    tail=st.sampled_from(["", ', "input_ids": [7]', ', "prompt": [8, 9]', ', "n": 1e400', ', "n": -0', ', "stream": true', "x",
                          ', "lora_path": "a"', ', "lora_path": ["a"]', ', "model": "base:a"', ', "model": "base"', ', "lora_p\\u0061th": "a"']),
)  # fmt: skip
def test_scanned_id_prompts_route_as_parsed_ones(path: str, ids: object, stream: object, tail: str) -> None:
    field = "prompt" if path == "/v1/completions" else "input_ids"
    members = {name: value for name, value in ((field, ids), ("stream", stream)) if value is not None}
    text = json.dumps(members)
    body = (text[:-1] + tail + "}" if members and tail != "x" else text + tail).encode()
    key, wants_stream = _parsed_route(path, body)
    scanned = scan_ids_request(path, body)
    if scanned is not None:
        assert list(scanned[0]) == list(key) and key and not isinstance(key, str)
        assert scanned[1] == wants_stream
    plain = path != "/v1/chat/completions" and isinstance(ids, list) and ids
    if not tail and plain and all(type(id) is int and 0 <= id < 2**32 for id in ids):
        assert scanned is not None, "a plain id prompt is read without parsing it in Python"


def test_expect_100_continue_and_admin_routes(harness: Harness) -> None:
    body = json.dumps({"text": "expect"}).encode()
    request = (b"POST /generate HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\nconnection: close\r\n"
               b"content-length: %d\r\n\r\n%b" % (len(body), body))  # fmt: skip
    answer = _raw_exchange(harness.port, request)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
    with httpx.Client(base_url=harness.url, timeout=30) as client:
        assert client.get("/health").json() == {"num_healthy_workers": 2}
        assert client.get("/no/such/route").status_code == 404
        assert client.get("/generate").status_code == 405  # generation takes POST / PUT only
        assert client.put("/generate", json={"text": "put"}).json()["text"] == "put"


def test_the_fast_path_checks_the_api_key() -> None:
    harness = Harness(api_key="secret")
    try:
        with httpx.Client(base_url=harness.url, timeout=30) as client:
            refused = generate(client, "x")
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert client.get("/list_workers").status_code == 401
            assert client.get("/health").status_code == 200
            allowed = client.post("/generate", json={"text": "y"}, headers={"authorization": "Bearer secret"})
            assert allowed.status_code == 200 and allowed.json()["text"] == "y"
    finally:
        harness.close()


def test_a_worker_silent_past_the_request_timeout_counts_as_broken_off() -> None:
    harness = Harness(max_retries=0, request_timeout_s=0.2)
    try:
        with httpx.Client(base_url=harness.url, timeout=30) as client:
            answer = generate(client, "hang")
            assert answer.status_code == 502 and "ReadTimeout" in answer.text
            assert generate(client, "next").status_code == 200  # the other worker
    finally:
        for worker in harness.workers:
            harness.loop.call_soon_threadsafe(worker.release.set)
        harness.close()
