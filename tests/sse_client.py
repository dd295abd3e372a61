"""Reading server-sent events strictly: every event is `data: <json>` + blank line, the last is
`data: [DONE]`, and nothing follows it."""

from __future__ import annotations

import json
from typing import Any

import httpx


def parse_sse(raw: str) -> list[Any]:
    """The JSON payloads of a complete SSE body; asserts the framing."""
    assert raw.endswith("data: [DONE]\n\n"), f"stream does not end with [DONE]: {raw[-200:]!r}"
    blocks = raw.split("\n\n")
    assert blocks[-1] == ""
    events = []
    for block in blocks[:-2]:
        assert block.startswith("data: "), f"malformed event {block[:200]!r}"
        assert "\n" not in block, f"multi-line event {block[:200]!r}"
        events.append(json.loads(block[len("data: ") :]))
    assert blocks[-2] == "data: [DONE]"
    return events


def post_stream(client: httpx.Client, url: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    return parse_sse(raw)
