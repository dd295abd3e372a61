"""`/metrics`: Prometheus text with request, token and latency series and engine gauges."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families
from scripted_engine import ScriptedEngine
from server_harness import served_engine
from starlette.testclient import TestClient

from sglr.server import ServerSettings, build_app


def _samples(text: str) -> dict[tuple[str, str], float]:
    """(sample name, finish_reason or le label) -> value, for the sglr series."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("sglr:"):
                key = sample.labels.get("finish_reason") or sample.labels.get("le") or ""
                out[(sample.name, key)] = sample.value
    return out


_ABORTED = ("sglr:num_requests_total", "abort")


def _finished_by_reason(samples: dict[tuple[str, str], float]) -> dict[str, float]:
    return {reason: value for (name, reason), value in samples.items() if name == "sglr:num_requests_total"}


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_metrics_count_requests_tokens_and_latencies(tiny_dir) -> None:
    with (
        served_engine(tiny_dir, ServerSettings(enable_metrics=True), max_total_tokens=5000) as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        greedy = {"temperature": 0, "ignore_eos": True}
        client.post(
            "/generate", json={"text": "one two three", "sampling_params": {**greedy, "max_new_tokens": 5}}
        )
        client.post(
            "/generate",
            json={
                "text": "one two three four",
                "sampling_params": {**greedy, "max_new_tokens": 7},
                "stream": True,
            },
        )
        client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, "ignore_eos": True})
        client.post("/generate", json={"text": "one", "sampling_params": {"max_new_tokens": 0}})
        response = client.get("/metrics")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        samples = _samples(response.text)
        stats = served.engine.get_stats()
    assert samples[("sglr:num_requests_total", "length")] == 4
    assert samples[("sglr:generation_tokens_total", "")] == 15
    prompt_tokens = samples[("sglr:prompt_tokens_total", "")]
    assert prompt_tokens >= 4
    assert samples[("sglr:cached_tokens_total", "")] > 0  # "one two three" prefixes the second prompt
    assert samples[("sglr:time_to_first_token_seconds_count", "")] == 3  # the prefill-only one has no token
    assert samples.get(("sglr:inter_token_latency_seconds_count", ""), 0) == 15 - 3
    assert samples[("sglr:e2e_request_latency_seconds_count", "")] == 4
    assert samples[("sglr:request_time_per_output_token_seconds_count", "")] == 3
    assert samples[("sglr:time_to_first_token_seconds_bucket", "+Inf")] == 3
    assert samples[("sglr:max_total_num_tokens", "")] == 5000 == stats["num_kv_slots"]
    assert samples[("sglr:num_running_reqs", "")] == 0 and samples[("sglr:num_queue_reqs", "")] == 0
    assert 0 < samples[("sglr:token_usage", "")] <= 1
    assert 0 < samples[("sglr:cache_hit_rate", "")] <= 1


def test_metrics_route_exists_only_when_enabled() -> None:
    # Without the flag there is no route: the settings decide, so an engine stand-in serves (the
    # route with the flag reads a real engine's stats: the tests above and below).
    app = build_app(ScriptedEngine([]), ServerSettings())  # type: ignore[arg-type]
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 404
        assert client.get("/health").status_code == 200


def _first_counts(response: httpx.Response) -> tuple[int, int]:
    """Reads a stream until it has carried generated text; (prompt tokens, completion tokens) as
    its last event reported them."""
    for line in response.iter_lines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line.removeprefix("data: "))
        if "meta_info" in event:  # /generate
            counts = event["meta_info"]
            if event["text"]:
                return counts["prompt_tokens"], counts["completion_tokens"]
        elif any(c.get("text") or c.get("delta", {}).get("content") for c in event["choices"]):
            return event["usage"]["prompt_tokens"], event["usage"]["completion_tokens"]
    raise AssertionError("the stream ended before generating anything")


def test_streams_whose_clients_went_away_count_once_as_aborted(tiny_dir) -> None:
    usage = {"stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    long = {"max_tokens": 3000, "ignore_eos": True, **usage}
    requests = [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": f"go {k}"}], **long})
        for k in range(4)
    ] + [
        ("/v1/completions", {"prompt": "go on and on", **long}),
        ("/generate", {"text": "go on", "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}, "stream": True}),
    ]  # fmt: skip
    with served_engine(tiny_dir, ServerSettings(enable_metrics=True)) as served:
        seen = []
        with contextlib.ExitStack() as open_streams:  # all streams run at once, then all go away
            for route, body in requests:
                client = open_streams.enter_context(httpx.Client(base_url=served.url, timeout=60))
                response = open_streams.enter_context(client.stream("POST", route, json=body))
                assert response.status_code == 200
                seen.append(_first_counts(response))
        with httpx.Client(base_url=served.url, timeout=60) as client:
            _wait_for(lambda: _samples(client.get("/metrics").text).get(_ABORTED, 0) == len(requests))
            stats = served.wait_idle()
            samples = _samples(client.get("/metrics").text)
            assert stats["num_aborted"] == len(requests)
            assert _finished_by_reason(samples) == {"abort": len(requests)}
            assert samples[("sglr:prompt_tokens_total", "")] == sum(prompt for prompt, _ in seen)
            generated = samples[("sglr:generation_tokens_total", "")]
            # Every token the server passed on was counted, and only those.
            num_first_tokens = samples[("sglr:time_to_first_token_seconds_count", "")]
            assert num_first_tokens == len(requests)
            assert generated == num_first_tokens + samples.get(
                ("sglr:inter_token_latency_seconds_count", ""), 0
            )
            assert sum(completion for _, completion in seen) <= generated <= stats["num_generated_tokens"]
            assert samples[("sglr:e2e_request_latency_seconds_count", "")] == len(requests)
            # A request that runs to its end afterwards adds one, and the aborted ones stay counted once.
            # (ignore_eos: a sampled end-of-text token would finish it as "stop", not "length".)
            client.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "ignore_eos": True},
            )
            samples = _samples(client.get("/metrics").text)
    assert _finished_by_reason(samples) == {"abort": len(requests), "length": 1}
    assert samples[("sglr:e2e_request_latency_seconds_count", "")] == len(requests) + 1
