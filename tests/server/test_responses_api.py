"""`/v1/responses` through the official `openai` client against sglr-server on the tiny model
(a Hermes-style tool template): whole and streamed responses agree with chat completions on the
same conversation, forced tool calls round-trip through `previous_response_id`, `text.format`
json_schema output validates, stored responses can be read back and deleted, 400s / 404s name
the field. Reasoning items come from a scripted engine (random weights do not reason)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pydantic
import pytest
from server_harness import Served, served_engine
from test_tool_calling import SCHEMA, TEMPLATE

from sglr.server import ServerSettings

WEATHER = {"type": "function", "name": "get_weather", "description": "Forecast", "parameters": SCHEMA}
ZONE = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 5}}, "required": ["zone"]}
TIME = {"type": "function", "name": "get_time", "parameters": ZONE}


@pytest.fixture(scope="module")
def served_responses(tiny_dir: Path) -> Iterator[Served]:
    settings = ServerSettings(enable_metrics=True)
    with served_engine(tiny_dir, settings, chat_template=TEMPLATE, debug_invariants=True) as s:
        yield s


@pytest.fixture(scope="module")
def client(served_responses: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served_responses.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _stream(client: openai.OpenAI, **kwargs) -> list:
    return list(client.responses.create(stream=True, **kwargs))


def test_a_response_is_the_chat_reply_of_its_conversation(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="default", instructions="Be brief.", input="Hello", max_output_tokens=5, temperature=0
    )
    chat = client.chat.completions.create(
        model="default",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
        max_completion_tokens=5,
        temperature=0,
    )
    assert response.id.startswith("resp_") and response.object == "response"
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text == chat.choices[0].message.content
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens) == (
        chat.usage.prompt_tokens,
        chat.usage.completion_tokens,
    )
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0
    cut_short = chat.choices[0].finish_reason == "length"
    assert response.status == ("incomplete" if cut_short else "completed")
    assert (response.incomplete_details is not None) == cut_short
    assert response.instructions == "Be brief." and response.max_output_tokens == 5 and response.store


def test_a_stream_sends_the_event_sequence_of_the_whole_response(client: openai.OpenAI) -> None:
    kwargs = {
        "model": "default",
        "input": [{"role": "user", "content": "Hi"}],
        "max_output_tokens": 4,
        "temperature": 0,
    }
    whole = client.responses.create(**kwargs)
    events = _stream(client, **kwargs)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", f"response.{'incomplete' if whole.status == 'incomplete' else 'completed'}"]  # fmt: skip
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == events[-4].text
    final = events[-1].response
    assert final.output_text == text and final.status == whole.status
    # (cached_tokens differ: the second run of the prompt finds it in the prefix cache)
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        whole.usage.input_tokens,
        whole.usage.output_tokens,
    )
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    stored = client.responses.retrieve(final.id)
    assert stored.output_text == text and stored.id == final.id


def test_a_forced_call_round_trips_through_previous_response_id(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model="default", input="Weather in Paris?", tools=[WEATHER], tool_choice="required",
        parallel_tool_calls=False, max_output_tokens=200, temperature=0,
    )  # fmt: skip
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and first.status == "completed" and first.parallel_tool_calls is False
    for call in calls:
        assert call.name == "get_weather" and call.call_id.startswith("call_") and call.id.startswith("fc_")
        jsonschema.validate(json.loads(call.arguments), SCHEMA)
    outputs = [{"type": "function_call_output", "call_id": c.call_id, "output": "sunny"} for c in calls]
    second = client.responses.create(
        model="default",
        previous_response_id=first.id,
        input=outputs,
        tools=[WEATHER],
        max_output_tokens=3,
        temperature=0,
    )
    assert [item.type for item in second.output] == ["message"] and second.previous_response_id == first.id
    # The second prompt is the chat conversation of the first's input, its calls and their outputs.
    tool_calls = [
        {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        *({"role": "tool", "tool_call_id": c.call_id, "content": "sunny"} for c in calls),
    ]
    chat = client.chat.completions.create(
        model="default",
        messages=messages,
        tools=[{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}],
        max_completion_tokens=3,
        temperature=0,
    )
    assert second.usage.input_tokens == chat.usage.prompt_tokens
    assert second.output_text == chat.choices[0].message.content


def test_a_named_call_streams_its_arguments(client: openai.OpenAI) -> None:
    events = _stream(
        client,
        model="default",
        input="Time?",
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "name": "get_time"},
        parallel_tool_calls=False,
        max_output_tokens=200,
        temperature=0,
    )
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [item.type for item in added] == ["function_call"] and added[0].name == "get_time"
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0].arguments == arguments and done[0].item_id == added[0].id
    jsonschema.validate(json.loads(arguments), ZONE)
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.output[0].arguments == arguments


def test_text_format_json_schema_constrains_the_output(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="default",
        input="A forecast as JSON",
        text={"format": {"type": "json_schema", "name": "forecast", "schema": SCHEMA, "strict": True}},
        max_output_tokens=60,
    )
    assert response.status == "completed"
    jsonschema.validate(json.loads(response.output_text), SCHEMA)
    assert response.text.format.type == "json_schema"


class Forecast(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=8)
    days: int = pydantic.Field(ge=1, le=9)


def test_the_clients_parse_helper_gets_its_model(client: openai.OpenAI) -> None:
    parsed = client.responses.parse(
        model="default", input="A forecast", text_format=Forecast, max_output_tokens=60
    )
    assert isinstance(parsed.output_parsed, Forecast) and 1 <= parsed.output_parsed.days <= 9


def test_stored_responses_are_read_back_deleted_and_not_kept_without_store(client: openai.OpenAI) -> None:
    created = client.responses.create(model="default", input="Hi", max_output_tokens=2, metadata={"k": "v"})
    assert client.responses.retrieve(created.id).model_dump() == created.model_dump()
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    unstored = client.responses.create(model="default", input="Hi", max_output_tokens=2, store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="default", input="Hi", previous_response_id=unstored.id)
    assert missing.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": [{"type": "web_search_call"}]}, "input[0].type"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input[0].content[0].type"),
        ({"input": []}, "input"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"background": True}, "background"),
        ({"metadata": {"k": 1}}, "metadata.k"),
        ({"temperature": 3}, "temperature"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_bad_requests_name_the_field(served_responses: Served, fields: dict, param: str) -> None:
    body = {"model": "default", "input": "Hi", "max_output_tokens": 2, **fields}
    response = httpx.post(served_responses.url + "/v1/responses", json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_unknown_ids_are_404_and_cancel_is_400(served_responses: Served, client: openai.OpenAI) -> None:
    with httpx.Client(base_url=served_responses.url, timeout=60) as http:
        for method in ("GET", "DELETE"):
            missing = http.request(method, "/v1/responses/resp_nope")
            assert missing.status_code == 404 and missing.json()["error"]["param"] == "response_id"
        assert http.post("/v1/responses/resp_nope/cancel").status_code == 404
        created = client.responses.create(model="default", input="Hi", max_output_tokens=1)
        cancel = http.post(f"/v1/responses/{created.id}/cancel")
        assert cancel.status_code == 400 and "background" in cancel.json()["error"]["message"]
        metrics = http.get("/metrics").text
        assert http.get("/debug/check_invariants").json()["ok"] is True  # the store's bound too
    stored = [line for line in metrics.splitlines() if line.startswith("sglr:num_stored_responses{")]
    assert len(stored) == 1 and float(stored[0].split()[-1]) >= 1
    served_responses.assert_no_leaks()
