"""Tool calling through the official `openai` client against sglr-server on the tiny model with
a Hermes-style template (random weights call tools only when constrained): forced calls parse
and validate against the schema, streams assemble to the same calls, 400s name the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import openai
import pytest
from server_harness import Served, served_engine

TEMPLATE = (
    "{% if tools %}<|system|>Tools:{% for t in tools %} {{ t.function.name }}{% endfor %}."
    " Call with <tool_call>{...}</tool_call>.\n{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% endif %}"
    "\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Forecast", "parameters": SCHEMA},
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 5}},
            "required": ["zone"],
        },
    },
}
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
SCHEMAS = {"get_weather": SCHEMA, "get_time": TIME["function"]["parameters"]}


@pytest.fixture(scope="module")
def served_tools(tiny_dir: Path) -> Iterator[Served]:
    with served_engine(tiny_dir, chat_template=TEMPLATE, debug_invariants=True) as s:
        yield s


@pytest.fixture(scope="module")
def client(served_tools: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served_tools.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _check_calls(calls, names):
    assert calls, "expected tool calls"
    for call in calls:
        assert call["id"].startswith("call_") and call["type"] == "function"
        assert call["function"]["name"] in names
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])


def _stream(client, **kwargs):
    content, calls, reasons = "", {}, []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for entry in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    entry.index, {"id": None, "type": None, "function": {"name": None, "arguments": ""}}
                )
                if entry.id:
                    call["id"], call["type"] = entry.id, entry.type
                    call["function"]["name"] = entry.function.name
                call["function"]["arguments"] += entry.function.arguments or ""
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    return content, [calls[i] for i in sorted(calls)], reasons


@pytest.mark.tp2
def test_named_tool_choice_forces_a_valid_call(client):
    kwargs = dict(
        model="default", messages=MESSAGES, tools=[WEATHER, TIME], max_tokens=200, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False,
    )  # fmt: skip
    response = client.chat.completions.create(**kwargs)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [c.model_dump() for c in choice.message.tool_calls]
    assert len(calls) == 1
    _check_calls(calls, {"get_weather"})
    content, streamed, reasons = _stream(client, **kwargs)
    assert reasons == ["tool_calls"] and not content.strip()
    _check_calls(streamed, {"get_weather"})
    assert [c["function"] for c in streamed] == [c["function"] for c in calls]  # greedy: same call


def test_required_with_several_tools(client):
    """Sampled, one call: the constraint bounds it, so it always ends as a valid call."""
    for seed in range(3):
        response = client.chat.completions.create(
            model="default", messages=MESSAGES, tools=[WEATHER, TIME], tool_choice="required", max_tokens=300,
            temperature=0.8, seed=seed, parallel_tool_calls=False,
        )  # fmt: skip
        choice = response.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None and len(choice.message.tool_calls) == 1
        _check_calls([c.model_dump() for c in choice.message.tool_calls], {"get_weather", "get_time"})


def test_parallel_calls_each_validate(client):
    """With parallel calls allowed every call in a finished reply is valid; over a few seeds the
    sampled replies hold more than one call (the separator is reachable and parsed)."""
    counts = []
    for seed in range(6):
        response = client.chat.completions.create(
            model="default", messages=MESSAGES, tools=[WEATHER, TIME], tool_choice="required", max_tokens=400,
            temperature=0.8, seed=seed,
        )  # fmt: skip
        choice = response.choices[0]
        if choice.finish_reason == "length":
            continue  # unbounded number of calls: cut mid-call, nothing to check
        assert choice.finish_reason == "tool_calls"
        calls = [c.model_dump() for c in choice.message.tool_calls]
        _check_calls(calls, {"get_weather", "get_time"})
        assert len({c["id"] for c in calls}) == len(calls)
        counts.append(len(calls))
    assert counts and max(counts) > 1, counts


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 3},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/node",
}
PLANT = {"type": "function", "function": {"name": "plant", "parameters": TREE}}


@pytest.mark.tp2
def test_recursive_parameters_are_constrained_through_the_grammar(client):
    """A `$ref` cycle in a tool's parameters: the call goes through the grammar engine and
    validates at any depth; the stream gives the same call."""
    kwargs = dict(
        model="default", messages=MESSAGES, tools=[WEATHER, PLANT], max_tokens=400, temperature=0,
        tool_choice={"type": "function", "function": {"name": "plant"}}, parallel_tool_calls=False,
    )  # fmt: skip
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "plant"
    jsonschema.validate(json.loads(call.function.arguments), TREE)
    _, streamed, reasons = _stream(client, **kwargs)
    assert reasons == ["tool_calls"]
    assert [c["function"] for c in streamed] == [call.function.model_dump()]


def test_auto_with_strict_tools_gives_text_or_valid_calls(client):
    """`strict` on "auto": the model may answer in text, and any call it makes is valid."""
    strict = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
    outcomes = set()
    for seed in range(6):
        choice = client.chat.completions.create(
            model="default", messages=MESSAGES, tools=[strict], max_tokens=120, temperature=1.0, seed=seed,
        ).choices[0]  # fmt: skip
        if choice.message.tool_calls:
            _check_calls([c.model_dump() for c in choice.message.tool_calls], {"get_weather"})
            outcomes.add("call")
        else:
            assert "<tool_call>" not in (choice.message.content or "")
            outcomes.add("text")
    assert "text" in outcomes


def test_none_gives_no_tool_calls(client):
    response = client.chat.completions.create(
        model="default", messages=MESSAGES, tools=[WEATHER], tool_choice="none", max_tokens=8, temperature=0
    )
    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].finish_reason in ("stop", "length")


def test_tool_messages_in_history(client, served_tools):
    """Assistant tool calls and `tool` results reach the template: the prompt is exactly the
    template's rendering of them (counted in prompt tokens; Jinja's trim_blocks drops the
    newline after each message's block tags)."""
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    response = client.chat.completions.create(
        model="default", messages=history, tools=[WEATHER], max_tokens=4
    )
    assert response.choices[0].finish_reason in ("stop", "length", "tool_calls")
    expected = (
        "<|system|>Tools: get_weather. Call with <tool_call>{...}</tool_call>.\n"
        "<|user|>Weather in Paris?<|assistant|><tool_call>get_weather</tool_call><|tool|>sunny<|assistant|>"
    )
    tokenizer = served_tools.engine.tokenizer
    assert response.usage.prompt_tokens == len(tokenizer.encode(expected, add_special_tokens=False))
    without = client.chat.completions.create(
        model="default", messages=history[:1], tools=[WEATHER], max_tokens=1
    )
    assert without.usage.prompt_tokens < response.usage.prompt_tokens


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]}, "tools[0].function.parameters"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"tools": [WEATHER, {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}}]}, "tools[1].function.parameters"),
        ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}}], "tool_choice": "required"},
            "tools[0].function.parameters",
        ),
    ],
)  # fmt: skip
def test_bad_tool_input_is_400_naming_the_field(client, extra, param):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=4, **extra)
    assert info.value.body["param"] == param, info.value.body


def test_language_gen_with_tools_through_the_openai_backend(served_tools):
    """`sgl.gen(tools=...)` on `sgl.OpenAI` against sglr-server: the calls land in the gen's
    meta info (streamed or not, the same greedy calls) and its text is the reply's content."""
    import sglr as sgl

    backend = sgl.OpenAI("default", base_url=served_tools.url + "/v1", api_key="unused")
    named = {"type": "function", "function": {"name": "get_weather"}}

    @sgl.function
    def ask(s):
        s += sgl.user("Weather in Paris?")
        s += sgl.assistant(
            sgl.gen("reply", max_tokens=200, temperature=0, tools=[WEATHER, TIME], tool_choice=named)
        )

    state = ask.run(backend=backend)
    calls = state.get_meta_info("reply")["tool_calls"]
    _check_calls(calls, {"get_weather"})
    assert state["reply"] == ""
    streamed = ask.run(backend=backend, stream=True)
    assert "".join(streamed.text_iter("reply")) == ""
    assert [c["function"] for c in streamed.get_meta_info("reply")["tool_calls"]] == [
        c["function"] for c in calls
    ]
