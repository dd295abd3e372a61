"""RuntimeEndpoint against a fake SGLang-native server on loopback: the exact wire format."""

from __future__ import annotations

import itertools

import pytest
from lang_fake_lm import char_logprob
from lang_fake_native_server import FakeNativeServer
from lang_serve import serve

import sglr as sgl
from sglr.errors import BackendError, ProgramError
from sglr.lang.backend.runtime_endpoint import StreamDecoder
from sglr.lang.ir import REGEX_INT


@pytest.fixture
def native():
    server = FakeNativeServer(reply=lambda prompt, sp: " Paris.\nMore text")
    with serve(server.app()) as url:
        yield server, url


def test_connects_and_picks_chat_template_from_model_path(native):
    server, url = native
    backend = sgl.RuntimeEndpoint(url)
    assert server.requests[0]["path"] == "/get_model_info"
    assert backend.get_model_name() == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert backend.get_chat_template().name == "llama-3-instruct"
    assert sgl.RuntimeEndpoint(url, chat_template_name="chatml").get_chat_template().name == "chatml"


def test_generate_request_body(native):
    server, url = native

    @sgl.function
    def capital(s):
        s += "Q: capital of France?\nA:" + sgl.gen(
            "answer", max_tokens=16, stop="\n", temperature=0.5, top_k=4
        )

    state = capital.run(backend=sgl.RuntimeEndpoint(url, chat_template_name="default"), top_p=0.9)
    assert state["answer"] == " Paris."
    body = server.generate_bodies()[-1]
    assert body == {
        "text": "Q: capital of France?\nA:",
        "sampling_params": {
            "skip_special_tokens": True,
            "spaces_between_special_tokens": True,
            "max_new_tokens": 16,
            "min_new_tokens": 0,
            "n": 1,
            "stop": ["\n"],
            "stop_token_ids": [],
            "stop_regex": [],
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 4,
            "min_p": 0.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "ignore_eos": False,
            "regex": None,
            "json_schema": None,
            "ebnf": None,
        },
    }
    assert state.get_meta_info("answer")["finish_reason"] == {"type": "stop", "matched": "\n"}


def test_dtype_becomes_regex_and_stops_and_logprob_keys_go_top_level(native):
    server, url = native

    @sgl.function
    def number(s):
        s += "n=" + sgl.gen_int("n", return_logprob=True, logprob_start_len=0, top_logprobs_num=2)

    number.run(backend=sgl.RuntimeEndpoint(url)).sync()
    body = server.generate_bodies()[-1]
    assert body["sampling_params"]["regex"] == REGEX_INT
    assert body["sampling_params"]["stop"] == ["<|eot_id|>", " ", "\n"]
    assert (body["return_logprob"], body["logprob_start_len"], body["top_logprobs_num"]) == (True, 0, 2)
    assert "dtype" not in body["sampling_params"] and "return_text_in_logprobs" not in body


def test_chat_template_stop_string_is_added(native):
    server, url = native

    @sgl.function
    def chat(s):
        s += sgl.user("hi")
        s += sgl.assistant(sgl.gen("reply", stop="."))

    state = chat.run(backend=sgl.RuntimeEndpoint(url))
    assert state["reply"] == " Paris"
    body = server.generate_bodies()[-1]
    assert body["text"] == (
        "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert body["sampling_params"]["stop"] == [".", "<|eot_id|>"]


def test_fork_sends_the_shared_prefix_before_the_branches(native):
    server, url = native

    @sgl.function
    def branches(s):
        s += "Shared context. "
        forks = s.fork(3)
        forks += lambda i: f"Branch {i}:" + sgl.gen("out", max_tokens=4)
        forks.join()

    state = branches.run(backend=sgl.RuntimeEndpoint(url))
    assert state["out"] == [" Par"] * 3
    bodies = server.generate_bodies()
    assert bodies[0] == {"text": "Shared context. ", "sampling_params": {"max_new_tokens": 0}}
    assert sorted(b["text"] for b in bodies[1:]) == [f"Shared context. Branch {i}:" for i in range(3)]


def _expected_decision(prompt: str, choices: list[str]) -> str:
    scores = []
    for choice in choices:
        context = prompt[-1:] if prompt else ""
        values = []
        for char in choice:
            values.append(char_logprob(context, char))
            context = char
        scores.append(sum(values) / len(values))
    return choices[scores.index(max(scores))]


@pytest.mark.parametrize(
    "choices",
    [["Paris", "London", "Rome"], ["yes", "no"], ["A", "B", "C", "D"], ["cat", "category", "dog!"]],
)
def test_select_picks_the_highest_mean_logprob(native, choices):
    server, url = native
    prompt = "The answer is: "

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("choice", choices=choices)

    state = pick.run(backend=sgl.RuntimeEndpoint(url))
    assert state["choice"] == _expected_decision(prompt, choices)
    assert state.text() == prompt + state["choice"]
    prefill, scoring = server.generate_bodies()[-2:]
    assert prefill == {"text": prompt, "sampling_params": {"max_new_tokens": 0}}
    assert scoring == {
        "text": [prompt + c for c in choices],
        "sampling_params": {"max_new_tokens": 0, "temperature": 0},
        "return_logprob": True,
        "return_text_in_logprobs": True,
        "logprob_start_len": len(prompt),  # prompt tokens (BOS + chars) - 1
    }


def test_select_unconditional_likelihood_sends_choice_tokens(native):
    server, url = native
    prompt = "Pick: "
    choices = ["red", "green"]

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("c", choices=choices, choices_method=sgl.unconditional_likelihood_normalized)

    state = pick.run(backend=sgl.RuntimeEndpoint(url))
    state.sync()
    last = server.generate_bodies()[-1]
    assert last["input_ids"] == [[ord(c) for c in choice] for choice in choices]
    scores = []
    for choice in choices:
        cond = [char_logprob(prev, c) for prev, c in zip(prompt[-1] + choice[:-1], choice, strict=True)]
        uncond = [0.0] + [char_logprob(prev, c) for prev, c in itertools.pairwise(choice)]
        scores.append(sum(a - b for a, b in zip(cond, uncond, strict=True)) / len(choice))
    assert state["c"] == choices[scores.index(max(scores))]
    assert state.get_meta_info("c")["normalized_unconditional_prompt_logprobs"] == pytest.approx(scores)


@pytest.mark.parametrize("incremental", [False, True])
def test_streaming_decodes_cumulative_and_incremental_events(incremental):
    server = FakeNativeServer(reply=lambda prompt, sp: "streamed words", incremental=incremental)
    with serve(server.app()) as url:

        @sgl.function
        def talk(s):
            s += "Say:" + sgl.gen("said", max_tokens=32, return_logprob=True)

        state = talk.run(backend=sgl.RuntimeEndpoint(url), stream=True)
        chunks = list(state.text_iter("said"))
        assert "".join(chunks) == "streamed words"
        assert server.generate_bodies()[-1]["stream"] is True
        meta = state.get_meta_info("said")
        assert [entry[1] for entry in meta["output_token_logprobs"]] == [ord(c) for c in "streamed words"]


def test_stream_decoder_yields_deltas_in_both_modes():
    cumulative, incremental = StreamDecoder(), StreamDecoder()
    texts = ["ab", "abcd", "abcde"]
    deltas = ["ab", "cd", "e"]
    for k, (text, delta) in enumerate(zip(texts, deltas, strict=True)):
        lp = [[-0.5, ord(c), c] for c in delta]
        cum = cumulative.feed(
            {
                "text": text,
                "output_ids": list(text),
                "meta_info": {
                    "completion_tokens": len(text),
                    "output_token_logprobs": [[-0.5, ord(c), c] for c in text],
                },
            }
        )
        inc = incremental.feed(
            {
                "text": delta,
                "output_ids": list(delta),
                "meta_info": {"completion_tokens": len(text), "output_token_logprobs": lp},
            }
        )
        assert cum[0] == inc[0] == delta, k
        assert cum[1]["output_token_logprobs"] == inc[1]["output_token_logprobs"]
    with pytest.raises(BackendError, match="bad things"):
        StreamDecoder().feed({"error": {"message": "bad things", "code": 400}})


def test_flush_cache_server_info_and_api_key():
    server = FakeNativeServer(api_key="secret", legacy_routes=True)
    with serve(server.app()) as url:
        with pytest.raises(BackendError, match="401"):
            sgl.RuntimeEndpoint(url)
        backend = sgl.RuntimeEndpoint(url, api_key="secret")
        assert sgl.flush_cache(backend) is True
        assert sgl.get_server_info(backend)["version"] == "fake-0"
        paths = [(r["method"], r["path"]) for r in server.requests]
        assert ("POST", "/flush_cache") in paths
        assert paths[-1] == ("GET", "/get_server_info")  # after a 404 on /server_info
        assert server.requests[-1]["headers"]["authorization"] == "Bearer secret"


def test_http_errors_surface_where_the_result_is_read(native):
    _server, url = native

    @sgl.function
    def too_long(s):
        s += "FAIL400 " + sgl.gen("x")

    state = too_long.run(backend=sgl.RuntimeEndpoint(url))
    with pytest.raises(ProgramError, match=r"Gen\('x'\).*HTTP 400.*too long"):
        state["x"]


def test_image_is_sent_as_raw_base64(native):
    server, url = native

    @sgl.function
    def look(s):
        s += sgl.user(sgl.image(b"img") + "Describe.")
        s += sgl.assistant(sgl.gen("d", max_tokens=4))

    look.run(backend=sgl.RuntimeEndpoint(url)).sync()
    assert server.generate_bodies()[-1]["image_data"] == "aW1n"


def test_run_level_priority_is_a_request_field(native):
    server, url = native

    @sgl.function
    def answer(s):
        s += "Q: capital of France?\nA:" + sgl.gen("answer", max_tokens=4, temperature=0)

    backend = sgl.RuntimeEndpoint(url, chat_template_name="default")
    assert answer.run(backend=backend, priority=7)["answer"]  # (read: the run has sent its request)
    body = server.generate_bodies()[-1]
    assert body["priority"] == 7 and "priority" not in body["sampling_params"]
    assert answer.run(backend=backend)["answer"]
    assert "priority" not in server.generate_bodies()[-1]
    with pytest.raises(ValueError, match="priority must be an integer"):
        answer.run(backend=backend, priority="high")
