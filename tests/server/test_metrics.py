"""`/metrics`: Prometheus text with request, token and latency series and engine gauges."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from server_harness import served_engine

from sglr.server import ServerSettings


def _samples(text: str) -> dict[tuple[str, str], float]:
    """(sample name, finish_reason or le label) -> value, for the sglr series."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("sglr:"):
                key = sample.labels.get("finish_reason") or sample.labels.get("le") or ""
                out[(sample.name, key)] = sample.value
    return out


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
    assert samples[("sglr:inter_token_latency_seconds_count", "")] == 15 - 3
    assert samples[("sglr:e2e_request_latency_seconds_count", "")] == 4
    assert samples[("sglr:request_time_per_output_token_seconds_count", "")] == 3
    assert samples[("sglr:time_to_first_token_seconds_bucket", "+Inf")] == 3
    assert samples[("sglr:max_total_num_tokens", "")] == 5000 == stats["num_kv_slots"]
    assert samples[("sglr:num_running_reqs", "")] == 0 and samples[("sglr:num_queue_reqs", "")] == 0
    assert 0 < samples[("sglr:token_usage", "")] <= 1
    assert 0 < samples[("sglr:cache_hit_rate", "")] <= 1


def test_metrics_route_exists_only_when_enabled(tiny_dir) -> None:
    with served_engine(tiny_dir) as served:
        assert httpx.get(served.url + "/metrics").status_code == 404
