"""`priority` and sessions on the served routes. A server with `--abort-on-priority-when-disabled`
refuses a request that gives a priority (a 400 naming the field) on every generation route, and
serves the same request without it; SGLang's priority flags reach the engine. `/open_session`,
`/generate` with `session_params` and `/close_session` continue a request on its KV; their
refusals are 400s naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_harness import Served, served_engine

_BODIES = {
    "/generate": {"text": "hello", "sampling_params": {"max_new_tokens": 2}},
    "/v1/completions": {"prompt": "hello", "max_tokens": 2},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
}


@pytest.fixture(scope="module")
def client(tiny_dir: Path) -> Iterator[httpx.Client]:
    with served_engine(tiny_dir, abort_on_priority_when_disabled=True, debug_invariants=True) as served:
        with httpx.Client(base_url=served.url, timeout=60) as c:
            yield c
        _check_clean(served)


def _check_clean(served: Served) -> None:
    served.wait_idle()
    served.engine.check_invariants()


@pytest.mark.parametrize("route", sorted(_BODIES))
def test_a_priority_is_refused_while_priority_scheduling_is_off(client: httpx.Client, route: str) -> None:
    refused = client.post(route, json={**_BODIES[route], "priority": 3})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "priority" and "--enable-priority-scheduling" in error["message"]
    assert client.post(route, json=_BODIES[route]).status_code == 200


@pytest.mark.parametrize("route", sorted(_BODIES))
def test_a_priority_that_is_not_an_integer_is_a_400(client: httpx.Client, route: str) -> None:
    refused = client.post(route, json={**_BODIES[route], "priority": "urgent"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "priority"


def test_the_priority_flags_are_sglangs_and_reach_the_engine_options() -> None:
    from sglr.server.launch import build_parser, engine_options

    defaults = engine_options(build_parser().parse_args([]))
    assert defaults["enable_priority_scheduling"] is False
    assert defaults["schedule_low_priority_values_first"] is False
    assert defaults["priority_scheduling_preemption_threshold"] == 10
    flags = ["--enable-priority-scheduling", "--schedule-low-priority-values-first"]
    flags += ["--priority-scheduling-preemption-threshold", "3", "--abort-on-priority-when-disabled"]
    options = engine_options(build_parser().parse_args(flags))
    assert options["enable_priority_scheduling"] and options["schedule_low_priority_values_first"]
    assert options["priority_scheduling_preemption_threshold"] == 3
    assert options["abort_on_priority_when_disabled"] is True


def _generate(client: httpx.Client, ids: list[int], **fields) -> httpx.Response:
    sampling = {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}
    return client.post("/generate", json={"input_ids": ids, "sampling_params": sampling, **fields})


def test_a_session_continues_a_request_over_http(client: httpx.Client) -> None:
    opened = client.post("/open_session", json={"capacity_of_str_len": 512})
    assert opened.status_code == 200, opened.text
    sid = opened.json()
    assert isinstance(sid, str) and sid
    first = _generate(client, [5, 6, 7], rid="h1", session_params={"id": sid}).json()
    second = _generate(client, [8, 9], rid="h2", session_params={"id": sid, "rid": "h1"}).json()
    full = _generate(client, [5, 6, 7, *first["output_ids"], 8, 9]).json()
    assert second["output_ids"] == full["output_ids"]
    assert second["meta_info"]["cached_tokens"] == 3 + len(first["output_ids"]) - 1
    assert client.post("/close_session", json={"session_id": sid}).status_code == 200
    gone = _generate(client, [8], session_params={"id": sid, "rid": "h2"})
    assert gone.status_code == 400 and gone.json()["error"]["param"] == "session_params.id"


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/open_session", {}, "capacity_of_str_len"),
        ("/open_session", {"capacity_of_str_len": 0}, "capacity_of_str_len"),
        ("/open_session", {"capacity_of_str_len": 8, "session_id": 5}, "session_id"),
        ("/close_session", {}, "session_id"),
        ("/close_session", {"session_id": "no-such-session"}, "session_id"),
        ("/generate", {"text": "hi", "session_params": {"id": "no-such-session"}}, "session_params.id"),
        ("/generate", {"text": "hi", "session_params": {"id": "s", "offset": -1}}, "session_params.offset"),
        ("/generate", {"text": "hi", "session_params": "s"}, "session_params"),
    ],
)
def test_session_refusals_are_400s_naming_the_field(
    client: httpx.Client, route: str, body: dict, param: str
) -> None:
    refused = client.post(route, json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param
