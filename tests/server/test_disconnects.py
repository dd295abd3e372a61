"""A client that goes away aborts its request at once and frees its KV slots: mid-stream,
before the first token, and for non-streaming requests."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from server_harness import Served

LONG = {"max_new_tokens": 3000, "ignore_eos": True}


def _num_aborted(served: Served) -> int:
    return served.engine.get_stats()["num_aborted"]


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.tp2
def test_disconnect_mid_stream_aborts_and_frees_slots(served: Served) -> None:
    before = _num_aborted(served)
    for route, body in (
        ("/generate", {"text": "go on", "sampling_params": LONG, "stream": True}),
        ("/v1/completions", {"prompt": "go on", "max_tokens": 3000, "ignore_eos": True, "stream": True}),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "go"}],
                "max_tokens": 3000,
                "ignore_eos": True,
                "stream": True,
            },
        ),
    ):
        with (
            httpx.Client(base_url=served.url, timeout=30) as client,
            client.stream("POST", route, json=body) as response,
        ):
            lines = response.iter_lines()
            received = [line for line, _ in zip(lines, range(6), strict=False) if line.startswith("data:")]
            assert received
        # The connection is closed now.
    _wait_for(lambda: _num_aborted(served) == before + 3)
    stats = served.wait_idle()
    assert stats["num_generated_tokens"] < 3 * 3000
    served.assert_no_leaks()


@pytest.mark.tp2
def test_disconnect_of_a_non_stream_request_aborts_it(served: Served) -> None:
    before = _num_aborted(served)
    with httpx.Client(base_url=served.url) as client:
        try:
            client.post("/generate", json={"text": "go on", "sampling_params": LONG}, timeout=0.3)
        except httpx.ReadTimeout:
            pass
        else:
            raise AssertionError("the request should still have been running")
    _wait_for(lambda: _num_aborted(served) == before + 1)
    served.assert_no_leaks()


@pytest.mark.tp2
def test_disconnect_while_queued_aborts_before_running(served: Served) -> None:
    """A raw socket that sends a request and closes at once: the server notices without having
    to write anything first."""
    before = _num_aborted(served)
    host, port = served.url.removeprefix("http://").split(":")
    body = (
        b'{"text": "go on", "stream": true, "sampling_params": {"max_new_tokens": 3000, "ignore_eos": true}}'
    )
    request = (
        f"POST /generate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(request)
    _wait_for(lambda: _num_aborted(served) == before + 1)
    assert served.engine.get_stats()["num_generated_tokens"] >= 0
    served.assert_no_leaks()
