"""The soak's clients: each sends `Call`s in a loop, some of them with a behaviour that stresses
the servers (leaving a stream at a random point, reading it slowly, aborting it through
`/abort_request`), and judges every answer.

An answer is judged by what a client can see: `ok` (a complete result: a JSON body of the
route's shape, or a stream that ends with `data: [DONE]`), `refused` (a 4xx with an error
body: right for a bad input, wrong for a good one), `failed` (a 5xx with an error body, or an
error event inside a stream: a typed failure), `left` (the client itself went away), or `lost`
(anything else: no answer in time, a connection reset, a stream cut without an error event, a
body that is not what the route returns).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass

import httpx

from .requests import Call

BEHAVIOURS = ("normal", "normal", "normal", "normal", "leave", "slow", "abort")


@dataclass
class Outcome:
    kind: str
    behaviour: str
    bad: bool
    started: float
    ended: float
    verdict: str  # ok | refused | failed | left | lost
    status: int | None
    detail: str = ""
    num_connect_retries: int = 0


def _error_message(body: object) -> str | None:
    """The message of an error body (OpenAI's `{"error": {...}}` or a plain `{"error": "..."}`)."""
    if not isinstance(body, dict) or "error" not in body:
        return None
    error = body["error"]
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error)


def _judge_body(call: Call, status: int, text: str) -> tuple[str, str]:
    try:
        body = json.loads(text) if text else None
    except ValueError:
        return "lost", f"{status} with a body that is not JSON: {text[:120]!r}"
    message = _error_message(body)
    if status >= 400:
        if message is None:
            return "lost", f"{status} without an error body: {text[:120]!r}"
        return ("refused" if status < 500 else "failed"), f"{status}: {message[:160]}"
    if call.path == "/generate":
        results = body if isinstance(body, list) else [body]
        if all(isinstance(r, dict) and "text" in r and "meta_info" in r for r in results):
            return "ok", ""
    elif isinstance(body, dict) and isinstance(body.get("choices"), list):
        return "ok", ""
    return "lost", f"{status} with an unexpected body: {text[:120]!r}"


async def _read_stream(
    response: httpx.Response, behaviour: str, rng: random.Random, abort
) -> tuple[str, str]:
    leave_after = rng.randrange(0, 4) if behaviour == "leave" else None
    abort_after = rng.randrange(0, 3) if behaviour == "abort" else None
    num_events, error = 0, None
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return ("failed", error) if error else ("ok", "")
        try:
            event = json.loads(data)
        except ValueError:
            return "lost", f"an event that is not JSON: {data[:120]!r}"
        message = _error_message(event)
        if message is not None:
            error = f"error event: {message[:160]}"
        num_events += 1
        if leave_after is not None and num_events > leave_after:
            return "left", f"left after {num_events} events"
        if abort_after is not None and num_events == abort_after + 1:
            await abort()
        if behaviour == "slow":
            await asyncio.sleep(rng.uniform(0.05, 0.3))
    return "lost", f"the stream ended after {num_events} events without [DONE]" + (
        f" ({error})" if error else ""
    )


async def send(client: httpx.AsyncClient, base_url: str, call: Call, behaviour: str, rng: random.Random,
               timeout_s: float) -> Outcome:  # fmt: skip
    """Sends `call` (retrying only connections that broke before any answer) and judges it."""
    if call.bad or not call.stream:
        behaviour = "normal" if behaviour in ("slow", "abort") or call.bad else behaviour
    body = call.content()
    rid = None
    if behaviour == "abort" and call.path == "/generate":
        rid = f"soak-{uuid.uuid4().hex}"
        payload = json.loads(body)
        payload["rid"] = rid
        body = json.dumps(payload).encode()
    elif behaviour == "abort":
        behaviour = "leave"  # OpenAI routes take no rid: leaving the stream aborts it

    async def abort() -> None:
        # A connection of its own: the stream holds one of the client's, and httpx's pool can
        # keep a slot after a cancelled exchange (the "leave" behaviour below).
        async with httpx.AsyncClient(timeout=30) as aborter:
            await aborter.post(f"{base_url}/abort_request", json={"rid": rid})

    started = time.monotonic()
    headers = {"content-type": call.content_type}
    num_retries = 0
    for _ in range(200):
        try:
            if behaviour == "leave" and not call.stream:
                # Gone before the answer: the connection closes while the server generates. A
                # client of its own, closed after, so the cancelled exchange leaves nothing behind.
                async with httpx.AsyncClient(timeout=timeout_s) as leaving:
                    exchange = _exchange(leaving, base_url, call, body, headers, behaviour, rng, abort)
                    try:
                        verdict, status, detail = await asyncio.wait_for(exchange, rng.uniform(0.01, 0.5))
                    except TimeoutError:
                        verdict, status, detail = "left", None, "left before the answer"
            else:
                exchange = _exchange(client, base_url, call, body, headers, behaviour, rng, abort)
                verdict, status, detail = await asyncio.wait_for(exchange, timeout_s)
            break
        except (httpx.ConnectError, _NoResponse):
            # The router is restarting: refused, or a kept-alive connection closed before any
            # answer. A client retries these (the OpenAI SDK does); what was answered never is.
            num_retries += 1
            await asyncio.sleep(0.1)
        except TimeoutError:
            verdict, status, detail = "lost", None, f"no complete answer within {timeout_s:.0f} s"
            break
        except httpx.HTTPError as exc:
            verdict, status, detail = "lost", None, f"{type(exc).__name__}: {exc}"
            break
    else:
        verdict, status, detail = "lost", None, "no answer after 200 broken connections"
    return Outcome(
        call.kind, behaviour, call.bad, started, time.monotonic(), verdict, status, detail, num_retries
    )


class _NoResponse(Exception):
    """The connection broke before the response's status line arrived."""


async def _exchange(client, base_url, call, body, headers, behaviour, rng, abort):
    request = client.build_request("POST", base_url + call.path, content=body, headers=headers)
    try:
        response = await client.send(request, stream=True)
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        raise _NoResponse(str(exc)) from exc
    try:
        status = response.status_code
        is_stream = response.headers.get("content-type", "").startswith("text/event-stream")
        if status == 200 and is_stream:
            verdict, detail = await _read_stream(response, behaviour, rng, abort)
            return verdict, status, detail
        text = (await response.aread()).decode("utf-8", "replace")
        verdict, detail = _judge_body(call, status, text)
        return verdict, status, detail
    finally:
        await response.aclose()
