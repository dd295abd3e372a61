"""`sglr-router` as its own process in front of two tiny-model `sglr-server` processes: the
native and OpenAI APIs pass through (streams too), workers join and leave at run time, a worker
killed under load fails only its own in-flight streams (each with an error event) while
requests that had received nothing are retried elsewhere, the router restarts over running
workers, and no process outlives its parent."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from sglr.testing.processes import Process, assert_gone, start_router, start_worker
from sse_client import parse_sse

WORKER_HEADER = "x-sglr-worker"


@pytest.fixture(scope="module")
def workers(tiny_dir: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    try:
        for _ in range(2):
            started.append(start_worker(tiny_dir, "--enable-metrics"))
        yield started
    finally:
        for worker in started:
            assert worker.stop() == 0, worker.output()


def group_text(group: int, index: int) -> str:
    return f"Shared system prompt {group}: " + " ".join(f"w{group}x{n}" for n in range(20)) + f" Q{index}?"


def generate(client: httpx.Client, text: str, **sampling) -> httpx.Response:
    body = {"text": text, "sampling_params": {"max_new_tokens": 4, "temperature": 0, **sampling}}
    return client.post("/generate", json=body)


def wait_for(predicate, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def list_workers(client: httpx.Client) -> dict[str, dict]:
    return {w["url"]: w for w in client.get("/list_workers").json()["workers"]}


def test_apis_pass_through_with_cache_affinity(workers: list[Process]) -> None:
    router = start_router([w.url for w in workers])
    try:
        with httpx.Client(base_url=router.url, timeout=120) as client:
            assert client.get("/health").json() == {"num_healthy_workers": 2}
            # Native, not streamed: the same greedy answer as asking a worker directly.
            routed = generate(client, "Hello there")
            assert routed.status_code == 200, routed.text
            worker_url = routed.headers[WORKER_HEADER]
            assert worker_url in {w.url for w in workers}
            with httpx.Client(base_url=worker_url, timeout=120) as direct:
                expected = generate(direct, "Hello there")
            assert routed.json()["text"] == expected.json()["text"]
            # Native stream, OpenAI completions (plain and streamed), chat stream.
            with client.stream("POST", "/generate", json={"text": "Hi", "stream": True,
                               "sampling_params": {"max_new_tokens": 3}}) as response:  # fmt: skip
                events = parse_sse(response.read().decode())
            assert events[-1]["meta_info"]["completion_tokens"] == 3
            model = client.get("/v1/models").json()["data"][0]["id"]
            completion = client.post(
                "/v1/completions", json={"model": model, "prompt": "Once", "max_tokens": 3}
            )
            assert completion.status_code == 200 and completion.json()["object"] == "text_completion"
            with client.stream("POST", "/v1/completions", json={"model": model, "prompt": "Once", "max_tokens": 3,
                               "stream": True}) as response:  # fmt: skip
                assert len(parse_sse(response.read().decode())) >= 1
            chat = {
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 3,
                "stream": True,
            }
            with client.stream("POST", "/v1/chat/completions", json=chat) as response:
                chunks = parse_sse(response.read().decode())
            assert chunks[0]["object"] == "chat.completion.chunk"
            # A worker's 400 comes back as it is, not retried and not a worker failure.
            bad = generate(client, "x", max_new_tokens=-1)
            assert bad.status_code == 400 and "max_new_tokens" in bad.text
            # Cache affinity: each prefix group stays on one worker, and the groups spread.
            homes: dict[int, set[str]] = {}
            for index in range(3):
                for group in range(4):
                    response = generate(client, group_text(group, index))
                    assert response.status_code == 200
                    homes.setdefault(group, set()).add(response.headers[WORKER_HEADER])
            assert all(len(urls) == 1 for urls in homes.values()), homes
            assert len(set().union(*homes.values())) == 2
            assert client.post("/flush_cache").json()["workers"] == {w.url: 200 for w in workers}
            # The query goes along: every worker refuses this timeout.
            assert client.post("/flush_cache", params={"timeout": "soon"}).status_code == 400
            metrics = client.get("/metrics").text
            for worker in workers:
                assert f'sglr_router:requests_total{{outcome="ok",worker="{worker.url}"}}' in metrics
                assert f'sglr_router:worker_healthy{{worker="{worker.url}"}} 1.0' in metrics
            assert 'outcome="error_status"' in metrics
            assert all(w["num_in_flight"] == 0 for w in list_workers(client).values())
    finally:
        assert router.stop() == 0, router.output()
    assert "sglr-router: shut down" in router.output()


def test_workers_join_and_leave_at_run_time(workers: list[Process]) -> None:
    first, second = workers
    router = start_router([first.url])
    try:
        with httpx.Client(base_url=router.url, timeout=120) as client:
            added = client.post("/add_worker", params={"url": second.url})
            assert added.status_code == 200 and added.json()["healthy"], added.text
            assert client.post("/add_worker", json={"url": second.url}).status_code == 400  # duplicate
            assert client.post("/add_worker", json={"url": "ftp://nowhere"}).status_code == 400
            served = {generate(client, group_text(group, 0)).headers[WORKER_HEADER] for group in range(6)}
            assert served == {first.url, second.url}
            removed = client.post("/remove_worker", json={"url": first.url})
            assert removed.status_code == 200
            served = {generate(client, group_text(group, 1)).headers[WORKER_HEADER] for group in range(6)}
            assert served == {second.url}
            assert client.post("/remove_worker", params={"url": first.url}).status_code == 404
            client.post("/remove_worker", params={"url": second.url})
            assert client.get("/health").status_code == 503
            refused = generate(client, "nobody home")
            assert refused.status_code == 503 and "no healthy worker" in refused.json()["error"]["message"]
            # A worker that is down when added joins once it answers (here: never).
            dead = client.post("/add_worker", params={"url": "http://127.0.0.1:9"})
            assert dead.status_code == 200 and not dead.json()["healthy"]
    finally:
        assert router.stop() == 0, router.output()


def test_worker_killed_under_load_fails_only_its_streams(tiny_dir: Path, workers: list[Process]) -> None:
    survivor = workers[0]
    victim = start_worker(tiny_dir)
    victim_children = victim.descendants()
    router = start_router([survivor.url, victim.url], "--policy", "round-robin")
    num_streams = 6
    outcomes: list[tuple[str, str]] = []  # (worker, raw stream)
    first_event = threading.Barrier(num_streams + 1, timeout=120)

    def stream(index: int) -> None:
        body = {"text": f"stream {index}", "stream": True,
                "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}  # fmt: skip
        with (
            httpx.Client(base_url=router.url, timeout=120) as client,
            client.stream("POST", "/generate", json=body) as response,
        ):
            assert response.status_code == 200
            lines = response.iter_raw()
            raw = next(lines)
            first_event.wait()
            raw += b"".join(lines)
            outcomes.append((response.headers[WORKER_HEADER], raw.decode()))

    try:
        with ThreadPoolExecutor(num_streams) as pool:
            futures = [pool.submit(stream, index) for index in range(num_streams)]
            first_event.wait()  # every stream has events on its way
            victim.popen.send_signal(signal.SIGKILL)
            for future in futures:
                future.result()
        assert_gone(victim_children)  # the killed server's scheduler process exits too
        on_victim = [raw for url, raw in outcomes if url == victim.url]
        on_survivor = [raw for url, raw in outcomes if url == survivor.url]
        assert len(on_victim) == len(on_survivor) == num_streams // 2
        for raw in on_survivor:
            assert parse_sse(raw)[-1]["meta_info"]["completion_tokens"] == 2000
        for raw in on_victim:
            last = parse_sse(raw)[-1]
            assert last["error"]["code"] == 502 and victim.url in last["error"]["message"]
        with httpx.Client(base_url=router.url, timeout=120) as client:
            # Nothing else is lost: every request after the kill is served by the survivor.
            for index in range(4):
                response = generate(client, f"after {index}")
                assert response.status_code == 200 and response.headers[WORKER_HEADER] == survivor.url
            state = list_workers(client)
            assert not state[victim.url]["healthy"] and state[victim.url]["num_failed"] == num_streams // 2
            assert state[survivor.url]["num_in_flight"] == 0
            assert 'outcome="failed"' in client.get("/metrics").text
    finally:
        assert router.stop() == 0, router.output()
        victim.stop()


def test_requests_not_yet_answered_are_retried(tiny_dir: Path, workers: list[Process]) -> None:
    """A worker that dies with non-streamed requests in flight: those go to another worker and
    succeed (nothing had reached their clients)."""
    survivor = workers[0]
    victim = start_worker(tiny_dir)
    router = start_router([survivor.url, victim.url], "--policy", "round-robin")
    try:
        with httpx.Client(base_url=router.url, timeout=120) as client, ThreadPoolExecutor(6) as pool:
            futures = [
                # Long enough that none ends before the kill; six fit the survivor's KV at once.
                pool.submit(generate, client, f"long {index}", max_new_tokens=1200, ignore_eos=True)
                for index in range(6)
            ]
            wait_for(lambda: list_workers(client)[victim.url]["num_in_flight"] == 3, what="victim load")
            time.sleep(0.2)
            victim.popen.send_signal(signal.SIGKILL)
            responses = [future.result() for future in futures]
            assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
            assert {r.headers[WORKER_HEADER] for r in responses} == {survivor.url}
            assert all(r.json()["meta_info"]["completion_tokens"] == 1200 for r in responses)
            assert 'outcome="retried"' in client.get("/metrics").text
    finally:
        assert router.stop() == 0, router.output()
        victim.stop()


def test_router_restarts_over_running_workers(workers: list[Process]) -> None:
    urls = [w.url for w in workers]
    for _ in range(2):
        router = start_router(urls)
        try:
            with httpx.Client(base_url=router.url, timeout=120) as client:
                assert client.get("/health").status_code == 200
                response = generate(client, "restart me")
                assert response.status_code == 200, response.text
                assert json.loads(response.text)["meta_info"]["completion_tokens"] <= 4
        finally:
            code = router.stop()
        assert code == 0 and "Traceback" not in router.output(), router.output()
    # The workers outlived both routers.
    for worker in workers:
        assert httpx.get(worker.url + "/health", timeout=30).status_code == 200


def test_a_client_leaving_mid_stream_frees_the_worker(workers: list[Process]) -> None:
    """The router closes its upstream stream when its client goes: the worker aborts the
    generation, and the router's load count for it returns to zero."""
    router = start_router([w.url for w in workers])
    body = {
        "text": "leave early",
        "stream": True,
        "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True},
    }
    try:
        with httpx.Client(base_url=router.url, timeout=120) as client:
            with client.stream("POST", "/generate", json=body) as response:
                worker_url = response.headers[WORKER_HEADER]
                next(response.iter_raw())
            assert list_workers(client)[worker_url]["num_in_flight"] in (0, 1)

            def worker_idle() -> bool:
                stats = httpx.get(worker_url + "/server_info", timeout=30).json()["internal_states"][0]
                return stats["num_running_requests"] == 0 and stats["num_waiting_requests"] == 0

            wait_for(worker_idle, what="the worker to finish the abandoned generation")
            # It ended as aborted (the worker saw its client go), not by running to its length.
            metrics = httpx.get(worker_url + "/metrics", timeout=30).text
            assert re.search(r'sglr:num_requests_total\{finish_reason="abort",[^}]*\} [1-9]', metrics), (
                metrics
            )
            wait_for(lambda: list_workers(client)[worker_url]["num_in_flight"] == 0, what="the load count")
            assert f'sglr_router:requests_total{{outcome="client_left",worker="{worker_url}"}} 1.0' in (
                client.get("/metrics").text
            )
    finally:
        assert router.stop() == 0, router.output()
