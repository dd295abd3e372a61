"""Hardening: every malformed request is a 400 whose message (and `param`) names the field, no
stack trace leaks, and the server keeps serving with no slot leaked."""

from __future__ import annotations

import json

import httpx
import pytest
from server_harness import Served

OK_PARAMS = {"max_new_tokens": 2}
LONG = [7] * 4200  # past the tiny model's 4096-token context


@pytest.fixture(scope="module")
def client(served: Served):
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


def assert_error(
    response: httpx.Response, status: int, param: str | None, words: str, code: str | None = None
) -> None:
    """`code`: OpenAI's name of the error where it has one (else the code is the status)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == (status if code is None else code) and error["param"] == param
    assert words in error["message"], error["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text


RAW_BODIES = [
    (b"{bad json", "not valid JSON"),
    (b"", "empty"),
    (b"[1, 2]", "must be a JSON object, got an array"),
    (b'"text"', "must be a JSON object, got a string"),
    (b'{"text": "hi", "sampling_params": {"temperature": NaN}}', "NaN is not valid JSON"),
    (b'{"text": "hi", "sampling_params": {"top_p": Infinity}}', "Infinity is not valid JSON"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
]


@pytest.mark.parametrize(("raw", "words"), RAW_BODIES)
def test_malformed_bodies(client: httpx.Client, raw: bytes, words: str) -> None:
    for route in ("/generate", "/v1/completions", "/v1/chat/completions"):
        response = client.post(route, content=raw, headers={"content-type": "application/json"})
        assert_error(response, 400, None, words)


NATIVE_CASES = [
    # wrong types
    ({"text": 5}, "text", "text must be a string"),
    ({"input_ids": ["a"]}, "input_ids", "input_ids must be"),
    ({"input_ids": [[1], "x"]}, "input_ids", "input_ids must be"),
    ({"text": "hi", "sampling_params": "hot"}, "sampling_params", "must be a JSON object"),
    ({"text": "hi", "sampling_params": {"temperature": "hot"}}, "sampling_params.temperature", "expected a number"),
    ({"text": "hi", "sampling_params": {"max_new_tokens": 1.5}}, "sampling_params.max_new_tokens", "expected an integer"),
    ({"text": "hi", "sampling_params": {"stop": 7}}, "sampling_params.stop", "string or a list of strings"),
    ({"text": "hi", "sampling_params": {"ignore_eos": "yes"}}, "sampling_params.ignore_eos", "a boolean"),
    ({"text": "hi", "stream": "yes"}, "stream", "stream must be a boolean"),
    ({"text": "hi", "return_logprob": "yes"}, "return_logprob", "return_logprob must be a boolean"),
    ({"text": "hi", "return_text_in_logprobs": 1}, "return_text_in_logprobs", "must be a boolean"),
    ({"text": "hi", "logprob_start_len": "0"}, "logprob_start_len", "must be an integer"),
    ({"text": "hi", "top_logprobs_num": -1}, "top_logprobs_num", "top_logprobs_num must be >= 0"),
    ({"text": "hi", "rid": 5}, "rid", "rid must be a string"),
    ({"text": "hi", "rid": ["a", "b"]}, "rid", "rid has 2 entries"),
    ({"text": ["a", "b"], "rid": ["x", "x"]}, "rid", "Duplicate request IDs"),
    # unknown keys
    ({"text": "hi", "sampling_params": {"max_new_tokenz": 3}}, "sampling_params.max_new_tokenz", "unknown field `max_new_tokenz`"),
    ({"text": "hi", "max_new_tokens": 3}, "max_new_tokens", "unknown field `max_new_tokens` in the /generate request"),
    ({"text": "hi", "image_data": "aGVsbG8="}, "image_data", "this model does not take images"),
    ({"text": "hi", "lora_path": "adapter"}, "lora_path", "serves no adapters"),
    ({"text": "hi", "lora_path": 5}, "lora_path", "lora_path must be a name or a list"),
    ({"text": "hi", "lora_id": 1}, "lora_id", "name the adapter with lora_path"),
    # out of range
    ({"text": "hi", "sampling_params": {"temperature": -1}}, "sampling_params.temperature", "temperature must be a non-negative"),
    ({"text": "hi", "sampling_params": {"top_p": 0}}, "sampling_params.top_p", "top_p must be in (0, 1]"),
    ({"text": "hi", "sampling_params": {"top_k": 0}}, "sampling_params.top_k", "top_k must be -1"),
    ({"text": "hi", "sampling_params": {"min_p": 2}}, "sampling_params.min_p", "min_p must be in [0, 1]"),
    ({"text": "hi", "sampling_params": {"frequency_penalty": 3}}, "sampling_params.frequency_penalty", "[-2, 2]"),
    ({"text": "hi", "sampling_params": {"presence_penalty": -3}}, "sampling_params.presence_penalty", "[-2, 2]"),
    ({"text": "hi", "sampling_params": {"repetition_penalty": 0}}, "sampling_params.repetition_penalty", "(0, 2]"),
    ({"text": "hi", "sampling_params": {"max_new_tokens": -1}}, "sampling_params.max_new_tokens", "at least 0"),
    ({"text": "hi", "sampling_params": {"min_new_tokens": 5, "max_new_tokens": 2}}, "sampling_params.min_new_tokens", "min_new_tokens must be in"),
    ({"text": "hi", "sampling_params": {"n": 0}}, "sampling_params.n", "n must be at least 1"),
    ({"text": "hi", "sampling_params": {"n": 100000000}}, "sampling_params.n", "over the server's limit"),
    ({"text": ["a"] * 600, "sampling_params": {"n": 2}}, "sampling_params.n", "over the server's limit"),
    ({"text": "hi", "sampling_params": {"seed": 2**64}}, "sampling_params.seed", "sampling_seed must be in"),
    ({"text": "hi", "sampling_params": {"stop": ["s"] * 33}}, "sampling_params.stop", "at most 32 stop strings"),
    ({"text": "hi", "sampling_params": {"stop": [""]}}, "sampling_params.stop", "non-empty"),
    ({"text": "hi", "sampling_params": {"stop_token_ids": [-1]}}, "sampling_params.stop_token_ids", "non-negative"),
    ({"text": "hi", "sampling_params": {"stop_token_ids": [10**20]}}, "sampling_params.stop_token_ids", "stop_token_ids must be in [0, 4095]"),
    ({"text": "hi", "sampling_params": {"logit_bias": {"99999": 1.0}}}, "sampling_params.logit_bias", "logit_bias must has keys in"),
    ({"text": "hi", "sampling_params": {"stop_regex": ["(a"]}}, "sampling_params.stop_regex", "invalid stop_regex"),
    ({"text": "hi", "sampling_params": {"ebnf": "root ::= 'a'\nitem ::= ("}}, "sampling_params.ebnf", "line 2, column 10"),
    ({"text": "hi", "sampling_params": {"ebnf": "root ::= 'a'", "regex": "a"}}, "sampling_params.regex", "Only one of"),
    ({"text": "hi", "sampling_params": {"structural_tag": '{"structures": [{"schema": {}, "end": ""}], "triggers": []}'}}, "sampling_params.structural_tag.structures[0].begin", "begin is required"),
    # found by fuzzing: a stack overflow (the server died) and a 10^9-symbol expansion (it aborted)
    ({"text": "hi", "sampling_params": {"ebnf": "root ::= " + "(" * 100_000 + "'a'" + ")" * 100_000}}, "sampling_params.ebnf", "nest deeper than 100"),
    ({"text": "hi", "sampling_params": {"ebnf": "root ::= 'a'" + "?" * 100_000}}, "sampling_params.ebnf", "nest deeper than 100"),
    ({"text": "hi", "sampling_params": {"ebnf": "a ::= 'x' | 'a' a\nroot ::= a{1000}{1000}{1000}"}}, "sampling_params.ebnf", "repetitions expand to more than"),
    # found by fuzzing: 500s (a float overflow) and NaN / infinite biases taken
    ({"text": "hi", "sampling_params": {"logit_bias": {"1": 10**400}}}, "sampling_params.logit_bias", "token ids to numbers"),
    ({"text": "hi", "sampling_params": {"logit_bias": {"1": "nan"}}}, "sampling_params.logit_bias", "finite numbers"),
    ({"text": "hi", "sampling_params": {"temperature": 10**400}}, "sampling_params.temperature", "a finite number"),
    ({"text": "hi", "sampling_params": {"json_schema": "{not json"}}, "sampling_params.json_schema", "json_schema is not valid JSON"),
    ({"text": "hi", "sampling_params": {"regex": "a", "json_schema": "{}"}}, "sampling_params.regex", "Only one of"),
    ({"input_ids": [1, 10**20]}, "input_ids", "input_ids must be in [0, 4095]"),
    ({"input_ids": [-3]}, "input_ids", "input_ids must be in [0, 4095]"),
    # prompt / context
    ({}, "text", "Either text, input_ids or input_embeds"),
    ({"text": "hi", "input_ids": [1]}, "text", "Either text, input_ids or input_embeds"),
    ({"text": []}, "text", "non-empty list"),
    ({"input_ids": []}, "input_ids", "input_ids cannot be empty"),
    ({"input_ids": LONG}, "input_ids", "longer than the model's context length"),
    ({"input_ids": LONG[:4000], "sampling_params": {"max_new_tokens": 200}}, "sampling_params.max_new_tokens", "maximum context length of 4096"),
    ({"text": ["a", "b"], "sampling_params": [{}, {}, {}]}, "sampling_params", "3 entries for 2 prompts"),
    ({"text": ["a", "b"], "sampling_params": [{"n": 2}, {"n": 1}]}, "sampling_params", "parallel_sample_num"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "param", "words"), NATIVE_CASES)
def test_native_generate_rejects_bad_input(client: httpx.Client, body: dict, param: str, words: str) -> None:
    assert_error(client.post("/generate", json=body), 400, param, words)
    # The same request as a stream is refused before any event is sent.
    if isinstance(body, dict) and "stream" not in body:
        assert_error(client.post("/generate", json={**body, "stream": True}), 400, param, words)


def test_lone_surrogates_are_refused(client: httpx.Client) -> None:
    # Valid JSON escapes, but not valid Unicode (the tokenizer cannot take them).
    raw = b'{"text": "a\\ud800b", "sampling_params": {"max_new_tokens": 2}}'
    assert_error(client.post("/generate", content=raw), 400, "text", "lone UTF-16 surrogate")
    chat = b'{"messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 2}'
    assert_error(
        client.post("/v1/chat/completions", content=chat), 400, "messages[0].content", "lone UTF-16 surrogate"
    )
    completion = b'{"prompt": "\\ud800", "max_tokens": 2}'
    assert_error(client.post("/v1/completions", content=completion), 400, "prompt", "lone UTF-16 surrogate")
    # found by fuzzing: an error message echoing one was a 500 (it has no UTF-8 form); it goes escaped
    unknown_model = client.post("/v1/completions", content=b'{"model": "\\ud800", "prompt": "x"}')
    assert_error(unknown_model, 404, "model", "does not exist", code="model_not_found")
    assert "`\\ud800`" in unknown_model.text


def test_the_server_keeps_serving_and_leaks_nothing(served: Served, client: httpx.Client) -> None:
    for body, *_ in NATIVE_CASES:
        client.post("/generate", json=body)
    response = client.post("/generate", json={"text": "still alive", "sampling_params": OK_PARAMS})
    assert response.status_code == 200 and response.json()["meta_info"]["completion_tokens"] == 2
    served.assert_no_leaks()
    assert not served.engine.get_stats()["num_aborted"] > served.engine.get_stats()["num_requests"]


def test_openai_routes_reject_bad_input_in_the_openai_shape(client: httpx.Client) -> None:
    cases = [
        ("/v1/completions", {"prompt": "x", "max_tokens": "many"}, "max_tokens", "max_tokens must be an integer"),
        ("/v1/completions", {"prompt": "x", "temperature": 2.5}, "temperature", "temperature must be in [0.0, 2.0]"),
        # found by fuzzing: 500s (a float overflow; a lone surrogate echoed in the error)
        ("/v1/completions", {"prompt": "x", "temperature": 10**400}, "temperature", "temperature must be in [0.0, 2.0]"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"add_generation_prompt": False}}, "chat_template_kwargs.add_generation_prompt", "not a template variable"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tokenize": True}}, "chat_template_kwargs.tokenize", "not a template variable"),
        ("/v1/completions", {"prompt": "x", "stop": [1]}, "stop", "stop must be a string or an array"),
        ("/v1/completions", {"prompt": "x", "logit_bias": {"a": 1}}, "logit_bias", "token ids"),
        ("/v1/completions", {"prompt": "x", "logit_bias": {"1": 500}}, "logit_bias", "[-100, 100]"),
        ("/v1/completions", {"prompt": [[1], []]}, "prompt", "prompt must be"),
        ("/v1/completions", {"prompt": LONG}, "prompt", "context length"),
        ("/v1/completions", {"prompt": "x", "best_of": 3}, "best_of", "best_of"),
        ("/v1/completions", {"prompt": "x", "min_tokens": 9, "max_tokens": 2}, "min_tokens", "min_tokens"),
        ("/v1/completions", {"prompt": "x", "json_schema": "{oops"}, "json_schema", "json_schema is not valid JSON"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages", "non-empty array"),
        ("/v1/chat/completions", {"messages": [{"role": "user"}]}, "messages[0].content", "required"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "string or an array"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0].type", "text-only"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}, "response_format.type", "response_format.type must be one of"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}}, "response_format.json_schema", "must be an object"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}, "regex": "a"}, "response_format", "only one of"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "structural_tag", "structures": [{"begin": "<f>", "end": "</f>"}], "triggers": ["<"]}}, "response_format.structures[0].schema", "schema is required"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "structural_tag", "triggers": ["<"]}}, "response_format.structures", "structures is required"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "structural_tag", "format": {"type": "any_text"}}}, "response_format.format", "not supported"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0}, "max_completion_tokens", "max_completion_tokens must be in"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": "yes"}, "logprobs", "logprobs must be a boolean"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage", "stream_options.include_usage must be a boolean"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]}, "functions", "not supported"),
    ]  # fmt: skip
    for route, body, param, words in cases:
        assert_error(client.post(route, json=body), 400, param, words)


def test_no_stack_trace_even_for_unexpected_failures(
    served: Served, client: httpx.Client, monkeypatch
) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(served.engine, "get_stats", broken)
    response = client.get("/server_info")
    assert response.status_code == 500
    assert "secret" not in response.text and "Traceback" not in response.text
    assert json.loads(response.text)["error"]["type"] == "internal_server_error"
