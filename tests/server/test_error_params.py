"""Errors the engine reports reach the client with the right HTTP status and an OpenAI error
object whose `param` names the field as the request spelled it: an HTTP error when nothing has
been streamed yet, an error event (then `[DONE]`) mid-stream."""

from __future__ import annotations

import json

import httpx
import pytest
from scripted_engine import ScriptedEngine, abort_delta, text_delta
from server_harness import Served
from starlette.testclient import TestClient

from sglr.errors import EngineClosedError, EngineInternalError, InvalidRequestError, RequestAbortedError
from sglr.server import ServerSettings, build_app
from sse_client import parse_sse

CHAT = [{"role": "user", "content": "x"}]
BAD_SCHEMA = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
# Well formed, but its second trigger starts no structure's begin (refused building the grammar).
UNUSED_TRIGGER = {
    "type": "structural_tag",
    "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
    "triggers": ["<", "["],
}


@pytest.fixture(scope="module")
def client(served: Served):
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    return error


# (route, body, param): the engine refuses the constraint when it compiles it.
BAD_CONSTRAINTS = [
    ("/generate", {"text": "x", "sampling_params": {"regex": "((", "max_new_tokens": 3}}, "sampling_params.regex"),
    ("/generate", {"text": "x", "sampling_params": {"json_schema": json.dumps(BAD_SCHEMA)}}, "sampling_params.json_schema"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "regex": "(("}, "regex"),
    ("/generate", {"text": "x", "sampling_params": {"ebnf": "root ::= (", "max_new_tokens": 3}}, "sampling_params.ebnf"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "ebnf": "root ::= undefined"}, "ebnf"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "json_schema": BAD_SCHEMA}, "json_schema"),
    ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 3, "regex": "(("}, "regex"),
    (
        "/v1/chat/completions",
        {"messages": CHAT, "max_tokens": 3, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": BAD_SCHEMA}}},
        "response_format",
    ),
    ("/generate", {"text": "x", "sampling_params": {"structural_tag": json.dumps(UNUSED_TRIGGER)}}, "sampling_params.structural_tag.triggers[1]"),
    ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 3, "response_format": UNUSED_TRIGGER}, "response_format.triggers[1]"),
]  # fmt: skip


@pytest.mark.parametrize(("route", "body", "param"), BAD_CONSTRAINTS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_constraint_the_engine_refuses_is_a_400_naming_the_request_field(
    client: httpx.Client, route: str, body: dict, param: str, stream: bool
) -> None:
    # Streamed or not, the refusal comes before any event, so it is an HTTP error.
    error = _error(client.post(route, json={**body, "stream": stream}), 400)
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert any(
        f"invalid {kind}" in error["message"] for kind in ("regex", "json_schema", "ebnf", "structural_tag")
    )


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/generate", {"input_ids": [7] * 4000, "sampling_params": {"max_new_tokens": 200}}, "sampling_params.max_new_tokens"),
        ("/v1/completions", {"prompt": [7] * 4000, "max_tokens": 200}, "max_tokens"),
        ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 5000}, "max_tokens"),
        ("/v1/chat/completions", {"messages": CHAT, "max_completion_tokens": 5000}, "max_completion_tokens"),
    ],
)  # fmt: skip
def test_a_request_the_engine_refuses_on_submission_names_the_request_field(
    client: httpx.Client, route: str, body: dict, param: str
) -> None:
    for stream in (False, True):
        error = _error(client.post(route, json={**body, "stream": stream}), 400)
        assert error["param"] == param and "maximum context length" in error["message"]


# Mid-stream errors need an engine that fails after it has streamed something: a scripted one.

_REGEX_ERROR = InvalidRequestError("invalid regex: unbalanced parenthesis", param="sampling_params.regex")
_SCHEMA_ERROR = InvalidRequestError("invalid json_schema: unknown type", param="sampling_params.json_schema")
_SCRIPTED_REQUESTS = {
    "/generate": {"text": "x", "sampling_params": {"regex": "a+"}},
    "/v1/completions": {"prompt": "x", "regex": "a+"},
    "/v1/chat/completions": {
        "messages": CHAT,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}},
        },
    },
}
_SCRIPTED_ERRORS = [
    # (engine error, route, the error object the client gets)
    (_REGEX_ERROR, "/generate", 400, "invalid_request_error", "sampling_params.regex", str(_REGEX_ERROR)),
    (_REGEX_ERROR, "/v1/completions", 400, "invalid_request_error", "regex", str(_REGEX_ERROR)),
    (_SCHEMA_ERROR, "/v1/chat/completions", 400, "invalid_request_error", "response_format", str(_SCHEMA_ERROR)),
    (EngineInternalError("internal error: boom"), "/v1/completions", 500, "internal_server_error", None, "internal error: boom"),
    (EngineClosedError("stopped"), "/v1/chat/completions", 503, "service_unavailable", None, "the engine is not running"),
]  # fmt: skip


def _scripted_client(error: Exception) -> TestClient:
    engine = ScriptedEngine([text_delta("ab", [1, 2]), abort_delta(error, completion_tokens=2)])
    return TestClient(build_app(engine, ServerSettings(enable_metrics=True)))  # type: ignore[arg-type]


@pytest.mark.parametrize(("engine_error", "route", "status", "kind", "param", "message"), _SCRIPTED_ERRORS)
def test_an_engine_error_mid_stream_is_an_error_event_then_done(
    engine_error: Exception, route: str, status: int, kind: str, param: str | None, message: str
) -> None:
    with _scripted_client(engine_error) as client:
        response = client.post(route, json={**_SCRIPTED_REQUESTS[route], "stream": True})
        assert response.status_code == 200
        events = parse_sse(response.text)
    *before, last = events
    assert before and not any("error" in event for event in before)  # what streamed before the failure
    assert last == {"error": {"message": message, "type": kind, "param": param, "code": status}}


@pytest.mark.parametrize(("engine_error", "route", "status", "kind", "param", "message"), _SCRIPTED_ERRORS)
def test_an_engine_error_after_some_text_fails_a_non_stream_request(
    engine_error: Exception, route: str, status: int, kind: str, param: str | None, message: str
) -> None:
    with _scripted_client(engine_error) as client:
        response = client.post(route, json=_SCRIPTED_REQUESTS[route])
    assert response.status_code == status
    assert response.json() == {"error": {"message": message, "type": kind, "param": param, "code": status}}


@pytest.mark.parametrize("route", sorted(_SCRIPTED_REQUESTS))
def test_the_callers_own_abort_keeps_the_partial_result(route: str) -> None:
    with _scripted_client(RequestAbortedError("aborted by the client")) as client:
        whole = client.post(route, json=_SCRIPTED_REQUESTS[route])
        stream = client.post(route, json={**_SCRIPTED_REQUESTS[route], "stream": True})
    assert whole.status_code == 200 and stream.status_code == 200
    body = whole.json()
    if route == "/generate":
        assert body["text"] == "ab" and body["meta_info"]["finish_reason"]["type"] == "abort"
    else:
        choice = body["choices"][0]
        assert choice["finish_reason"] == "abort"
        assert choice.get("text", choice.get("message", {}).get("content")) == "ab"
    assert not any("error" in event for event in parse_sse(stream.text))
