"""What the server fuzz modules (`test_fuzz_*.py`) share: sending a body, and the check that the
server is still whole after a test."""

from __future__ import annotations

import httpx
from hypothesis import note
from hypothesis.control import currently_in_test_context
from server_harness import Served

from fuzz_support import check_response, encode


def post(client: httpx.Client, path: str, body: object, **headers: str) -> httpx.Response:
    if currently_in_test_context():  # (also called after a test's examples)
        note(f"POST {path} {body!r}"[:2000])
    response = client.post(
        path, content=encode(body), headers={"content-type": "application/json", **headers}
    )
    check_response(response)
    return response


def assert_alive(served: Served, client: httpx.Client) -> None:
    """The server answers its probe and a normal request, and holds no request or slot."""
    assert client.get("/health").status_code == 200
    body = {"text": "still here", "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}
    answer = client.post("/generate", json=body)
    assert answer.status_code == 200 and answer.json()["meta_info"]["completion_tokens"] == 2
    served.assert_no_leaks()
