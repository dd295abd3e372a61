"""The Mistral and Llama 3 call formats end to end through the `openai` client: a tiny model
served with a template of each kind (the template decides the format), forced calls come back
as `tool_calls` that validate, streams give the same calls, and tool history renders."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import openai
import pytest
from server_harness import Served, served_engine

from sglr.server.tools.formats import LLAMA3, MISTRAL, detect_tool_format

MISTRAL_TEMPLATE = (
    "{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
    "{% for m in messages %}{% if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
    "{% elif m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | tojson }}"
    "{% elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]"
    "{% else %}{{ m.content }}{% endif %}{% endfor %}"
)
LLAMA3_TEMPLATE = (
    "{% if tools %}<|start_header_id|>system<|end_header_id|>Tools:{% for t in tools %} {{ t | tojson }}{% endfor %}"
    ' Reply with {"name": function name, "parameters": arguments}.<|eot_id|>{% endif %}'
    "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}"
    "{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>{% endif %}"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 6},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
    },
    "required": ["city", "days"],
}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(
    scope="module", params=[(MISTRAL_TEMPLATE, MISTRAL), (LLAMA3_TEMPLATE, LLAMA3)], ids=["mistral", "llama3"]
)
def served(request, tiny_dir: Path) -> Iterator[tuple[Served, object]]:
    template, fmt = request.param
    assert detect_tool_format(template) is fmt
    with served_engine(tiny_dir, chat_template=template) as s:
        yield s, fmt


def _client(served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served[0].url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_forced_calls_parse_from_the_template_format(served):
    client = _client(served)
    kwargs = dict(
        model="default", messages=MESSAGES, tools=[WEATHER], max_tokens=120, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False,
    )  # fmt: skip
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA)
    names, arguments, reasons = [], "", []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            for entry in c.delta.tool_calls or []:
                names += [entry.function.name] if entry.function.name else []
                arguments += entry.function.arguments or ""
            reasons += [c.finish_reason] if c.finish_reason else []
    assert names == ["get_weather"] and reasons == ["tool_calls"]
    assert json.loads(arguments) == json.loads(call.function.arguments)


def test_sampled_required_calls_validate(served):
    client = _client(served)
    for seed in range(3):
        choice = client.chat.completions.create(
            model="default", messages=MESSAGES, tools=[WEATHER], tool_choice="required", max_tokens=120,
            temperature=0.9, seed=seed, parallel_tool_calls=False,
        ).choices[0]  # fmt: skip
        assert choice.finish_reason == "tool_calls"
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments), SCHEMA)


def test_tool_history_reaches_the_template(served):
    client = _client(served)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 1}'},
    }
    history = [*MESSAGES, {"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]  # fmt: skip
    with_history = client.chat.completions.create(
        model="default", messages=history, tools=[WEATHER], max_tokens=1
    )
    without = client.chat.completions.create(
        model="default", messages=MESSAGES, tools=[WEATHER], max_tokens=1
    )
    tokenizer = served[0].engine.tokenizer
    rendered = tokenizer.apply_chat_template(history, add_generation_prompt=True, tools=[WEATHER])
    assert "sunny" in rendered and "get_weather" in rendered
    assert with_history.usage.prompt_tokens == len(tokenizer.encode(rendered, add_special_tokens=False))
    assert with_history.usage.prompt_tokens > without.usage.prompt_tokens
