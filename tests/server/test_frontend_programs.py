"""SGLang-style frontends against a real sglr-server: sglr's `RuntimeEndpoint` programs (gen,
select, fork/join, streaming, run_batch), and the wire behaviour SGLang's own RuntimeEndpoint
relies on (cumulative stream text, `select`'s prefill + scoring calls)."""

from __future__ import annotations

import json

import httpx
import pytest
from server_harness import Served

import sglr as sgl


@pytest.fixture(scope="module")
def backend(served: Served):
    endpoint = sgl.RuntimeEndpoint(served.url, chat_template_name="default")
    yield endpoint
    endpoint.shutdown()


@pytest.mark.tp2
def test_program_with_gen_select_and_fork(served: Served, backend) -> None:
    @sgl.function
    def program(s, topic):
        s += "Topic: " + topic + "\n"
        s += "Kind: " + sgl.select("kind", choices=["animal", "plant", "mineral"]) + "\n"
        forks = s.fork(2)
        for i, f in enumerate(forks):
            f += f"Fact {i}:" + sgl.gen("fact", max_tokens=6, temperature=0, ignore_eos=True)
        forks.join()
        s += "Summary:" + sgl.gen("summary", max_tokens=5, temperature=0, ignore_eos=True)

    state = program.run(topic="cats", backend=backend)
    assert state["kind"] in ("animal", "plant", "mineral")
    assert isinstance(state["fact"], list) and len(state["fact"]) == 2
    # Greedy generations are what the engine gives for the same text.
    text = state.text()
    summary_prompt = text[: text.rindex("Summary:") + len("Summary:")]
    direct = served.engine.generate(
        summary_prompt, {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}
    )
    assert state["summary"] == direct["text"]
    served.assert_no_leaks()


@pytest.mark.tp2
def test_select_picks_the_highest_scoring_choice(served: Served, backend) -> None:
    prompt = "The answer is"
    choices = [" yes", " no", " maybe"]

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("answer", choices=choices)

    state = pick.run(backend=backend)
    scores = []
    for choice in choices:
        out = served.engine.generate(
            prompt + choice,
            {"max_new_tokens": 0},
            return_logprob=True,
            logprob_start_len=len(served.engine.tokenizer.encode(prompt)) - 1,
        )
        values = [e[0] for e in out["meta_info"]["input_token_logprobs"] if e[0] is not None]
        scores.append(sum(values) / len(values))
    assert state["answer"] == choices[scores.index(max(scores))]


def test_streaming_program_yields_the_generated_text(backend) -> None:
    @sgl.function
    def story(s):
        s += "Once upon a time" + sgl.gen("rest", max_tokens=10, temperature=0, ignore_eos=True)

    streamed = story.run(backend=backend, stream=True)
    pieces = list(streamed.text_iter("rest"))
    assert "".join(pieces) == streamed["rest"] and len(pieces) > 1
    assert story.run(backend=backend)["rest"] == streamed["rest"]


def test_run_batch(backend) -> None:
    @sgl.function
    def answer(s, question):
        s += "Q: " + question + "\nA:" + sgl.gen("a", max_tokens=4, temperature=0, ignore_eos=True)

    states = answer.run_batch([{"question": q} for q in ("one?", "two?", "three?")], backend=backend)
    assert [len(st["a"]) > 0 for st in states] == [True] * 3


def test_sglang_runtime_endpoint_wire_protocol(served: Served) -> None:
    """What SGLang's RuntimeEndpoint does (with `requests`; httpx here): GET /get_model_info,
    streams parsed as cumulative text (`data["text"][pos:]`), prefill-only calls, POST
    /flush_cache without a body, GET /server_info, and a join via /concate_and_append_request."""
    headers = {"Content-Type": "application/json; charset=utf-8"}
    http = httpx.Client(base_url=served.url, timeout=60)
    assert http.get("/get_model_info").json()["model_path"] == served.engine.model_path
    body = {
        "text": "Once upon a time",
        "sampling_params": {
            "skip_special_tokens": True, "spaces_between_special_tokens": True, "max_new_tokens": 12,
            "min_new_tokens": 0, "n": 1, "stop": [], "stop_token_ids": [], "stop_regex": [],
            "temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0,
            "presence_penalty": 0.0, "ignore_eos": True, "regex": None, "json_schema": None,
        },
        "return_logprob": True, "top_logprobs_num": 2, "return_text_in_logprobs": True, "stream": True,
    }  # fmt: skip
    pos, pieces, meta = 0, [], None
    with http.stream("POST", "/generate", content=json.dumps(body), headers=headers) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                if line == "data: [DONE]":
                    break
                data = json.loads(line[5:].strip("\n"))
                pieces.append(data["text"][pos:])
                pos = len(data["text"])
                meta = data["meta_info"]
    whole = http.post("/generate", json={**body, "stream": False}).json()
    assert "".join(pieces) == whole["text"]
    assert meta is not None and len(meta["output_token_logprobs"]) == meta["completion_tokens"] == 12
    prefill = http.post("/generate", json={"text": "Once upon", "sampling_params": {"max_new_tokens": 0}})
    assert prefill.status_code == 200 and prefill.json()["meta_info"]["prompt_tokens"] > 0
    assert http.post("/flush_cache").status_code == 200
    assert "max_total_num_tokens" in http.get("/server_info").json()
    join = http.post("/concate_and_append_request", json={"src_rids": ["a"], "dst_rid": "b"})
    assert join.status_code == 200
    http.close()


def test_native_error_body_is_readable_by_both_clients(served: Served) -> None:
    response = httpx.post(served.url + "/generate", json={"text": "x", "sampling_params": {"top_p": 5}})
    assert response.status_code == 400
    assert "top_p" in response.json()["error"]["message"]
    with pytest.raises(Exception, match="top_p"):
        sgl.RuntimeEndpoint(served.url)._post({"text": "x", "sampling_params": {"top_p": 5}})
