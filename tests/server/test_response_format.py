"""Constrained output over the OpenAI API: `response_format` json_schema / json_object /
structural_tag and the `regex` extension, validated with `jsonschema` / `re`; bad patterns are
400s naming the field."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import openai
import pytest
from json_prefix import is_json_prefix
from server_harness import Served
from transformers import AutoTokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "Describe a person as JSON."}]
DIGIT = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["n"],
}
# One-character trigger: a logit bias on the tokens starting with it opens segments.
STRUCTURAL_TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<d>", "schema": DIGIT, "end": "</d>"}],
    "triggers": ["<"],
}
# Free text holds no trigger; each segment is `<d>` JSON `</d>`.
TAGGED = re.compile(r"[^<]*(?:<d>\{[^<]*\}</d>[^<]*)*")


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.mark.tp2
def test_chat_json_schema_output_validates(client: openai.OpenAI) -> None:
    for seed in range(3):
        reply = client.chat.completions.create(
            model="default",
            messages=MESSAGES,
            max_tokens=200,
            temperature=0.8,
            seed=seed,
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}},
        )
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        jsonschema.validate(json.loads(choice.message.content), SCHEMA)


@pytest.mark.tp2
def test_streamed_json_schema_output_validates(client: openai.OpenAI) -> None:
    chunks = client.chat.completions.create(
        model="default",
        messages=MESSAGES,
        max_tokens=200,
        temperature=0,
        stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}},
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), SCHEMA)


@pytest.mark.tp2
def test_json_object_and_regex(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="default",
        messages=MESSAGES,
        max_tokens=200,
        temperature=0,
        response_format={"type": "json_object"},
    )
    choice = reply.choices[0]
    # Whichever way it ends: a whole object, or the start of one cut off at the token limit.
    assert choice.finish_reason in ("stop", "length"), choice.finish_reason
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict), choice.message.content
    else:
        assert reply.usage.completion_tokens == 200
        assert choice.message.content.lstrip().startswith("{"), choice.message.content
        assert is_json_prefix(choice.message.content), choice.message.content
    pattern = r"(yes|no), [0-9]{3}"
    completion = client.completions.create(
        model="default",
        prompt="Answer:",
        max_tokens=20,
        temperature=1.0,
        seed=1,
        extra_body={"regex": pattern},
    )
    assert re.fullmatch(pattern, completion.choices[0].text)
    chat = client.chat.completions.create(
        model="default", messages=MESSAGES, max_tokens=20, temperature=0, extra_body={"regex": pattern}
    )
    assert re.fullmatch(pattern, chat.choices[0].message.content)


@pytest.mark.tp2
def test_native_regex_and_json_schema(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=120) as http:
        out = http.post(
            "/generate",
            json={"text": "Number:", "sampling_params": {"regex": "[1-9][0-9]{2}", "max_new_tokens": 10}},
        ).json()
        assert re.fullmatch("[1-9][0-9]{2}", out["text"])
        out = http.post(
            "/generate",
            json={
                "text": "JSON:",
                "sampling_params": {"json_schema": json.dumps(SCHEMA), "max_new_tokens": 200},
            },
        ).json()
        jsonschema.validate(json.loads(out["text"]), SCHEMA)


def test_chat_structural_tag_segments_validate(client: openai.OpenAI, tiny_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    special = set(tokenizer.all_special_ids)  # `<|endoftext|>` too: a bias on EOS would end every reply
    bias = {
        str(i): 8 for i in range(len(tokenizer)) if tokenizer.decode([i]).startswith("<") and i not in special
    }
    num_segments = 0
    for seed in range(4):
        reply = client.chat.completions.create(
            model="default",
            messages=MESSAGES,
            max_tokens=40,
            temperature=1.0,
            seed=seed,
            logit_bias=bias,
            response_format=STRUCTURAL_TAG,
        )
        choice = reply.choices[0]
        text = choice.message.content
        whole = TAGGED.match(text)
        rest = text[whole.end() :]
        # The output ends (EOS) only outside a segment; a cut one is the start of `<d>{...}</d>`.
        assert rest == "" if choice.finish_reason == "stop" else rest.startswith("<d>"[: len(rest)]), text
        for value in re.findall(r"<d>(\{[^<]*\})</d>", text[: whole.end()]):
            jsonschema.validate(json.loads(value), DIGIT)
            num_segments += 1
    assert num_segments > 0


def test_invalid_patterns_are_400s_naming_the_field(served: Served, client: openai.OpenAI) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        for stream in (False, True):
            bad = http.post(
                "/generate",
                json={"text": "x", "sampling_params": {"regex": "((", "max_new_tokens": 3}, "stream": stream},
            )
            assert bad.status_code == 400 and "regex" in bad.json()["error"]["message"]
        schema = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
        bad = http.post(
            "/generate", json={"text": "x", "sampling_params": {"json_schema": json.dumps(schema)}}
        )
        assert bad.status_code == 400 and "json_schema" in bad.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="regex"):
        client.completions.create(model="default", prompt="x", max_tokens=3, extra_body={"regex": "(("})
    served.assert_no_leaks()


def test_the_prefix_check_takes_every_prefix_of_a_document_and_no_error() -> None:
    document = '{"name": "A\\u00e9 \\"x\\"", "age": -12.5e+3, "tags": [true, false, null, {}], "n": []}'
    assert json.loads(document)
    assert all(is_json_prefix(document[:n]) for n in range(len(document) + 1))
    for bad in ('{"a" 1', '{"a": 1,}', "[1 2]", '{"a": tru e}', "{a: 1}", '{"a": 01}', '{"a": 1}}', '"\\x"'):
        assert not is_json_prefix(bad), bad
