"""SGLang's native routes over raw HTTP against a real uvicorn: request forms, response layout,
logprob alignment, streaming (cumulative by default), and the operational routes."""

from __future__ import annotations

import itertools
import threading
import time

import httpx
import pytest
from server_harness import Served, served_engine

from sglr.server import ServerSettings
from sse_client import post_stream

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
PROMPTS = ["The quick brown fox", "def main():\n    return", "Return the value"]


@pytest.fixture(scope="module")
def client(served: Served):
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


@pytest.mark.tp2
def test_generate_text_matches_the_engine(served: Served, client: httpx.Client) -> None:
    response = client.post("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY})
    assert response.status_code == 200
    out = response.json()
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["completion_tokens"] == len(out["output_ids"]) == 12
    assert meta["prompt_tokens"] == len(served.engine.tokenizer.encode(PROMPTS[0]))
    direct = served.engine.generate(PROMPTS[0], GREEDY)
    assert out["output_ids"] == direct["output_ids"] and out["text"] == direct["text"]


def test_put_is_accepted_like_sglang(client: httpx.Client) -> None:
    response = client.put("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY})
    assert response.status_code == 200 and response.json()["meta_info"]["completion_tokens"] == 12


@pytest.mark.tp2
def test_batches_of_text_and_ids_keep_request_order(served: Served, client: httpx.Client) -> None:
    alone = [client.post("/generate", json={"text": p, "sampling_params": GREEDY}).json() for p in PROMPTS]
    batch = client.post("/generate", json={"text": PROMPTS, "sampling_params": GREEDY}).json()
    assert isinstance(batch, list) and [r["output_ids"] for r in batch] == [r["output_ids"] for r in alone]
    ids = [served.engine.tokenizer.encode(p) for p in PROMPTS]
    by_ids = client.post("/generate", json={"input_ids": ids, "sampling_params": GREEDY}).json()
    assert [r["output_ids"] for r in by_ids] == [r["output_ids"] for r in alone]
    one = client.post("/generate", json={"input_ids": ids[1], "sampling_params": GREEDY}).json()
    assert isinstance(one, dict) and one["output_ids"] == alone[1]["output_ids"]


@pytest.mark.tp2
def test_n_fans_out_sample_major_with_distinct_seeded_samples(client: httpx.Client) -> None:
    params = {"temperature": 1.0, "max_new_tokens": 8, "ignore_eos": True, "n": 3, "seed": 11}
    out = client.post("/generate", json={"text": PROMPTS[:2], "sampling_params": params}).json()
    assert len(out) == 6
    # Sample-major: items 0, 2, 4 continue prompt 0.
    assert {r["meta_info"]["prompt_tokens"] for r in out[0::2]} == {out[0]["meta_info"]["prompt_tokens"]}
    samples = [r["output_ids"] for r in out[0::2]]
    assert len({tuple(s) for s in samples}) == 3, "n samples with a seed must differ"
    again = client.post("/generate", json={"text": PROMPTS[:2], "sampling_params": params}).json()
    assert [r["output_ids"] for r in again] == [r["output_ids"] for r in out]


@pytest.mark.tp2
def test_max_new_tokens_zero_prefills_only(client: httpx.Client) -> None:
    out = client.post("/generate", json={"text": PROMPTS[2], "sampling_params": {"max_new_tokens": 0}}).json()
    assert out["text"] == "" and out["output_ids"] == []
    assert out["meta_info"]["completion_tokens"] == 0
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 0}


@pytest.mark.tp2
def test_input_logprobs_align_with_the_prompt(served: Served, client: httpx.Client) -> None:
    prompt = PROMPTS[1]
    body = {
        "text": prompt,
        "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True},
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": 3,
        "return_text_in_logprobs": True,
    }
    meta = client.post("/generate", json=body).json()["meta_info"]
    prompt_ids = served.engine.tokenizer.encode(prompt)
    inputs = meta["input_token_logprobs"]
    assert [entry[1] for entry in inputs] == prompt_ids
    assert inputs[0][0] is None and all(isinstance(e[0], float) and e[0] <= 0 for e in inputs[1:])
    assert all(isinstance(e[2], str) for e in inputs)
    assert len(meta["output_token_logprobs"]) == meta["output_token_logprobs_length"] == 4
    assert len(meta["input_top_logprobs"]) == len(prompt_ids) and meta["input_top_logprobs"][0] is None
    # Greedy: the chosen token is the most likely one, so it heads its top list.
    for entry, top in zip(meta["output_token_logprobs"], meta["output_top_logprobs"], strict=True):
        assert len(top) == 3 and top[0][1] == entry[1]
    values = [e[0] for e in inputs[1:]]
    assert meta["normalized_prompt_logprob"] == pytest.approx(sum(values) / len(values))


def test_stop_string_is_trimmed_and_reported(client: httpx.Client) -> None:
    free = client.post("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY}).json()["text"]
    stop = free[3:5]
    out = client.post(
        "/generate", json={"text": PROMPTS[0], "sampling_params": {**GREEDY, "stop": stop}}
    ).json()
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert out["text"] == free[: free.index(stop)]


@pytest.mark.tp2
def test_stream_is_cumulative_by_default_and_ends_with_done(client: httpx.Client) -> None:
    body = {"text": PROMPTS[0], "sampling_params": GREEDY, "return_logprob": True}
    final = client.post("/generate", json=body).json()
    events = post_stream(client, "/generate", {**body, "stream": True})
    assert len(events) >= 2
    for before, after in itertools.pairwise(events):
        assert after["text"].startswith(before["text"])
        assert after["output_ids"][: len(before["output_ids"])] == before["output_ids"]
    for event in events:
        meta = event["meta_info"]
        assert len(event["output_ids"]) == meta["completion_tokens"]
        assert len(meta["output_token_logprobs"]) == meta["completion_tokens"]
        assert "index" not in event
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])
    last = events[-1]
    assert last["text"] == final["text"] and last["output_ids"] == final["output_ids"]
    assert last["meta_info"]["finish_reason"] == final["meta_info"]["finish_reason"]


def test_batch_stream_events_carry_their_index(client: httpx.Client) -> None:
    finals = client.post("/generate", json={"text": PROMPTS, "sampling_params": GREEDY}).json()
    events = post_stream(client, "/generate", {"text": PROMPTS, "sampling_params": GREEDY, "stream": True})
    last_by_index = {}
    for event in events:
        last_by_index[event["index"]] = event
    assert sorted(last_by_index) == [0, 1, 2]
    assert [last_by_index[i]["text"] for i in range(3)] == [r["text"] for r in finals]


def test_incremental_stream_mode_sends_deltas(tiny_dir) -> None:
    settings = ServerSettings(incremental_streaming_output=True)
    with served_engine(tiny_dir, settings) as served, httpx.Client(base_url=served.url, timeout=60) as c:
        final = c.post("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY}).json()
        events = post_stream(c, "/generate", {"text": PROMPTS[0], "sampling_params": GREEDY, "stream": True})
    assert "".join(e["text"] for e in events) == final["text"]
    assert [t for e in events for t in e["output_ids"]] == final["output_ids"]
    assert events[-1]["meta_info"]["completion_tokens"] == 12  # counts stay cumulative


def test_request_id_is_used_and_must_be_unique_while_running(served: Served, client: httpx.Client) -> None:
    out = client.post("/generate", json={"text": "a", "sampling_params": GREEDY, "rid": "my-id"}).json()
    assert out["meta_info"]["id"] == "my-id"
    batch = client.post(
        "/generate", json={"text": ["a", "b"], "sampling_params": GREEDY, "rid": ["r-a", "r-b"]}
    ).json()
    assert [r["meta_info"]["id"] for r in batch] == ["r-a", "r-b"]
    long_body = {"text": "a", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}, "rid": "busy"}
    with client.stream("POST", "/generate", json={**long_body, "stream": True}) as stream:
        lines = stream.iter_lines()
        next(lines)  # running now
        clash = client.post("/generate", json={**long_body, "sampling_params": GREEDY})
        assert clash.status_code == 400 and clash.json()["error"]["param"] == "rid"
    served.assert_no_leaks()


@pytest.mark.tp2
def test_model_and_server_info(served: Served, client: httpx.Client) -> None:
    info = client.get("/get_model_info").json()
    assert info == client.get("/model_info").json()
    assert info["model_path"] == served.engine.model_path and info["is_generation"] is True
    assert info["architectures"] == ["LlamaForCausalLM"]
    server = client.get("/server_info").json()
    assert server.keys() == client.get("/get_server_info").json().keys()
    assert server["max_total_num_tokens"] == served.engine.runner.num_kv_slots
    assert server["api_key"] is None and server["schedule_policy"] == "lpm"
    assert server["internal_states"][0]["num_kv_slots"] == served.engine.runner.num_kv_slots
    models = client.get("/v1/models").json()
    assert models["data"][0]["id"] == served.engine.served_model_name
    assert client.get("/").status_code == 200


def test_health_routes(client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/health_generate").status_code == 200


@pytest.mark.tp2
def test_flush_cache_empties_the_prefix_cache_and_refuses_while_busy(
    served: Served, client: httpx.Client
) -> None:
    client.post("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY})
    assert served.engine.get_stats()["num_cached_kv_slots"] > 0
    response = client.post("/flush_cache")
    assert response.status_code == 200 and response.text.startswith("Cache flushed.")
    assert served.engine.get_stats()["num_cached_kv_slots"] == 0
    assert client.get("/flush_cache").status_code == 200
    body = {"text": "x", "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}, "stream": True}
    with client.stream("POST", "/generate", json=body) as stream:
        lines = stream.iter_lines()  # NOTE: keep a reference: a dropped iterator closes the connection
        next(lines)
        busy = client.post("/flush_cache")
        assert busy.status_code == 400 and "running" in busy.json()["error"]["message"]
    # The stream was closed by the client: its request is aborted, and a waiting flush succeeds.
    assert client.post("/flush_cache?timeout=10").status_code == 200
    assert client.post("/flush_cache?timeout=soon").status_code == 400
    served.assert_no_leaks()


@pytest.mark.tp2
def test_abort_request_ends_a_running_request_with_its_partial_output(
    served: Served, client: httpx.Client
) -> None:
    results = {}

    def run(rid: str) -> None:
        body = {"text": "x", "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}, "rid": rid}
        results[rid] = client.post("/generate", json=body).json()

    threads = [threading.Thread(target=run, args=(rid,)) for rid in ("ab-1", "ab-2", "ab-3")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while served.engine.get_stats()["num_running_requests"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.post("/abort_request", json={"rid": "ab-1"}).status_code == 200
    threads[0].join(timeout=10)
    assert results["ab-1"]["meta_info"]["finish_reason"]["type"] == "abort"
    assert "ab-2" not in results
    assert client.post("/abort_request", json={"abort_all": True}).status_code == 200
    for thread in threads:
        thread.join(timeout=10)
    for rid in ("ab-2", "ab-3"):
        meta = results[rid]["meta_info"]
        assert meta["finish_reason"]["type"] == "abort" and meta["completion_tokens"] < 3000
    assert client.post("/abort_request", json={}).status_code == 400
    served.assert_no_leaks()


def test_concate_and_append_route_accepts_sglang_joins(client: httpx.Client) -> None:
    ok = client.post("/concate_and_append_request", json={"src_rids": ["a", "b"], "dst_rid": "c"})
    assert ok.status_code == 200
    bad = client.post("/concate_and_append_request", json={"src_rids": "a", "dst_rid": "c"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "src_rids"


def test_unknown_routes_and_methods_answer_in_the_error_shape(client: httpx.Client) -> None:
    missing = client.get("/no_such_route")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == 404
    wrong = client.get("/generate")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == 405
