"""The Responses API's parts without a model: the bounded SQLite store, input items as chat
messages, field renames, and reasoning items (from a scripted engine whose reply holds
reasoning, with `--reasoning-parser qwen3`), whole and streamed through the `openai` client."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from scripted_engine import ScriptedEngine, abort_delta, text_delta
from starlette.testclient import TestClient

from sglr.errors import EngineConfigError, LimitExceededError, RequestAbortedError
from sglr.http.errors import ApiError
from sglr.server import ServerSettings, build_app
from sglr.server.openai.responses.items import ChatMessages
from sglr.server.openai.responses.request import client_param
from sglr.server.openai.responses.store import ResponseStore


def _response(response_id: str, text: str = "hi") -> dict:
    return {"id": response_id, "object": "response", "output": [{"type": "message", "content": text}]}


def test_the_store_keeps_the_newest_and_evicts_the_oldest() -> None:
    store = ResponseStore(None, max_responses=2)
    for k in range(4):
        store.put(_response(f"resp_{k}"), [{"role": "user", "content": str(k)}])
        store.check_invariants()
    assert len(store) == 2 and store.num_evicted == 2
    assert store.get("resp_0") is None and store.get("resp_1") is None
    kept = store.get("resp_3")
    assert kept is not None and kept.conversation() == [
        {"role": "user", "content": "3"},
        *_response("resp_3")["output"],
    ]
    store.put(_response("resp_2", "again"), [])  # a replaced response becomes the newest
    store.put(_response("resp_4"), [])
    assert store.get("resp_3") is None and store.get("resp_2").response["output"][0]["content"] == "again"
    assert store.delete("resp_2") and not store.delete("resp_2") and len(store) == 1


def test_a_store_file_outlives_its_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "responses.sqlite")
    first = ResponseStore(path, max_responses=5)
    first.put(_response("resp_a"), [{"role": "user", "content": "x"}])
    first.close()
    again = ResponseStore(path, max_responses=5)
    assert again.get("resp_a").input_items == [{"role": "user", "content": "x"}]
    with pytest.raises(EngineConfigError):
        ResponseStore(str(tmp_path / "missing" / "dir" / "file.sqlite"), max_responses=5)
    with pytest.raises(EngineConfigError):
        ResponseStore(None, max_responses=0)
    # The server's settings refuse both before a model loads.
    with pytest.raises(EngineConfigError, match="directory"):
        ServerSettings(responses_store_path=str(tmp_path / "missing" / "file.sqlite"))
    with pytest.raises(EngineConfigError, match="max_stored_responses"):
        ServerSettings(max_stored_responses=0)


def test_items_become_chat_turns() -> None:
    messages = ChatMessages(max_messages=10)
    messages.add(
        [
            {
                "role": "developer",
                "content": [{"type": "input_text", "text": "be "}, {"type": "input_text", "text": "kind"}],
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": '{"a": 1}'},
            {"type": "reasoning", "summary": []},
            {"type": "function_call_output", "call_id": "c2", "output": "two"},
        ],
        "input",
    )
    assert messages.messages == [
        {"role": "system", "content": "be kind"},
        {"role": "assistant", "content": "ok", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"a": 1}'}},
        ]},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "name": "g"},
    ]  # fmt: skip
    with pytest.raises(ApiError) as bad:
        messages.add(
            [{"role": "user", "content": "x"}, {"type": "function_call", "call_id": "c", "name": ""}], "input"
        )
    assert bad.value.param == "input[1].name"
    with pytest.raises(LimitExceededError):
        messages.add([{"role": "user", "content": "x"}] * 10, "input")


def test_chat_field_names_become_the_responses_names() -> None:
    assert client_param("max_completion_tokens") == "max_output_tokens"
    assert client_param("response_format.json_schema.schema") == "text.format.schema"
    assert client_param("response_format.type") == "text.format.type"
    assert client_param("tools[3].function.parameters") == "tools[3].parameters"
    assert client_param("messages[2].content") == "input"
    assert client_param("temperature") == "temperature" and client_param(None) is None


REPLY = [text_delta("<think>abc", [5]), text_delta("de</think>Hel", [5, 6]), text_delta("lo", [5, 6, 7])]
REPLY[-1]["meta_info"]["finish_reason"] = {"type": "stop", "matched": None}


class _RecordingEngine(ScriptedEngine):
    """Remembers the messages each prompt was rendered from."""

    def __init__(self) -> None:
        super().__init__(REPLY)
        self.rendered: list[list[dict]] = []
        render = self.tokenizer.apply_chat_template

        def recording(messages: list[dict], **kwargs) -> str:
            self.rendered.append(messages)
            return render(messages, **kwargs)

        self.tokenizer.apply_chat_template = recording  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def engine() -> _RecordingEngine:
    return _RecordingEngine()


@pytest.fixture(scope="module")
def reasoning_client(engine: _RecordingEngine) -> openai.OpenAI:
    app = build_app(engine, ServerSettings(reasoning_parser="qwen3"))  # type: ignore[arg-type]
    with TestClient(app) as http:
        yield openai.OpenAI(
            base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0
        )


def test_reasoning_comes_as_a_reasoning_item(reasoning_client: openai.OpenAI) -> None:
    response = reasoning_client.responses.create(model="default", input="Think", reasoning={"effort": "low"})
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == "abcde" and response.output_text == "Hello"
    # The scripted tokenizer makes every text 3 tokens.
    assert response.usage.output_tokens == 3 and response.usage.output_tokens_details.reasoning_tokens == 3
    assert response.reasoning.effort == "low"


def test_streamed_reasoning_comes_before_the_message(reasoning_client: openai.OpenAI) -> None:
    events = list(reasoning_client.responses.create(model="default", input="Think", stream=True))
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.reasoning_text.delta", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0, 1]
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == "abcde"
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message"] and final.output_text == "Hello"
    assert reasoning_client.responses.retrieve(final.id).output_text == "Hello"


def test_previous_response_id_chains_whole_conversations(
    reasoning_client: openai.OpenAI, engine: _RecordingEngine
) -> None:
    first = reasoning_client.responses.create(model="default", instructions="Be brief.", input="One")
    second = reasoning_client.responses.create(model="default", previous_response_id=first.id, input="Two")
    third = reasoning_client.responses.create(
        model="default", previous_response_id=second.id, input=[{"role": "user", "content": "Three"}]
    )
    # Each reply's reasoning is not rendered again; the first's instructions are not carried over.
    assert engine.rendered[-1] == [
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Two"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Three"},
    ]
    assert engine.rendered[-3][0] == {"role": "system", "content": "Be brief."}
    # The third's input items: the whole conversation, a page at a time (the client follows pages).
    listed = reasoning_client.responses.input_items.list(third.id, order="asc", limit=100)
    assert [item.type for item in listed.data] == ["message", "reasoning", "message"] * 2 + ["message"]
    assert listed.data[0].content[0].text == "One" and listed.data[-1].content[0].text == "Three"
    assert listed.data[1].id == first.output[0].id and not listed.has_more
    paged = list(reasoning_client.responses.input_items.list(third.id, limit=2))  # newest first
    assert [item.id for item in paged] == [item.id for item in reversed(listed.data)]
    with pytest.raises(openai.BadRequestError) as bad:
        reasoning_client.responses.input_items.list(third.id, limit=0)
    assert bad.value.body["param"] == "limit"


def test_the_clients_stream_helper_assembles_the_stored_response(reasoning_client: openai.OpenAI) -> None:
    with reasoning_client.responses.stream(model="default", input="Think") as stream:
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        assembled = stream.get_final_response()
    assert "".join(texts) == "Hello" == assembled.output_text
    stored = reasoning_client.responses.retrieve(assembled.id)
    # (the helper's items have a `parsed` field, None without a text_format)
    assert [i.model_dump(exclude_none=True) for i in assembled.output] == [
        i.model_dump(exclude_none=True) for i in stored.output
    ]


def test_an_aborted_response_is_cancelled_whole_and_streamed() -> None:
    deltas = [text_delta("Hel", [5]), abort_delta(RequestAbortedError("aborted by /abort_request"), 1)]
    app = build_app(ScriptedEngine(deltas), ServerSettings())  # type: ignore[arg-type]
    with TestClient(app) as http:
        client = openai.OpenAI(
            base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0
        )
        whole = client.responses.create(model="default", input="Hi")
        events = list(client.responses.create(model="default", input="Hi", stream=True))
    assert (
        whole.status == "cancelled" and whole.output_text == "Hel" and whole.output[0].status == "incomplete"
    )
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "cancelled"
    assert events[-2].type == "response.output_item.done" and events[-2].item.status == "incomplete"
