"""Tool-call parsers per format, the streaming parser (split at every boundary it must give what
the whole-reply parser gives), and format detection (constraints: test_tool_constraint.py)."""

from __future__ import annotations

import json

import pytest

from sglr.server.tools.chat import ChatTools
from sglr.server.tools.formats import FALLBACK, HERMES, LLAMA3, MISTRAL, detect_tool_format
from sglr.server.tools.hermes import parse_hermes
from sglr.server.tools.llama3 import parse_llama3
from sglr.server.tools.mistral import parse_mistral
from sglr.server.tools.stream import ToolCallDeltas

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
}


def _calls(parsed):
    return [(c.name, c.arguments) for c in parsed.calls]


def test_hermes_several_calls_and_text_around():
    text = (
        'Let me check.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call> done'
    )
    parsed = parse_hermes(text)
    assert _calls(parsed) == [("a", {"x": 1}), ("b", {})]
    assert parsed.content is not None and parsed.content.startswith("Let me check.")
    assert parsed.content.endswith("done") and "tool_call" not in parsed.content


def test_hermes_malformed_block_stays_content():
    text = '<tool_call>{"name": "a", "arguments": {"x": </tool_call>'
    parsed = parse_hermes(text)
    assert parsed.calls == () and parsed.content == text


def test_hermes_plain_text():
    assert parse_hermes("hello").content == "hello" and parse_hermes("").content is None


def test_mistral_calls_and_malformed():
    parsed = parse_mistral(
        'Sure [TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    )
    assert _calls(parsed) == [("a", {"x": 1}), ("b", {})] and parsed.content == "Sure"
    bad = '[TOOL_CALLS] [{"name": "a"'
    assert parse_mistral(bad).calls == () and parse_mistral(bad).content == bad


def test_llama3_json_calls():
    parsed = parse_llama3(
        '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}'
    )
    assert _calls(parsed) == [("a", {"x": 1}), ("b", {})] and parsed.content is None
    assert parse_llama3('{"name": 3}').calls == ()
    assert parse_llama3("The answer is {x}").content == "The answer is {x}"


def test_detect_format():
    assert detect_tool_format("{% for t in tools %}<tool_call>{% endfor %}") is HERMES
    assert detect_tool_format("[TOOL_CALLS]") is MISTRAL
    assert detect_tool_format("<|python_tag|>") is LLAMA3
    assert detect_tool_format("{{ messages }}") is FALLBACK
    assert detect_tool_format(None) is FALLBACK


HERMES_TEMPLATE = "{% if tools %}<tool_call>{% endif %}{{ messages }}"
STREAM_TEXTS = [
    'Hi <tool_call>\n{"name": "a", "arguments": {"x": "é"}}\n</tool_call> and '
    '<tool_call>{"name": "b", "arguments": {}}</tool_call>',
    "no calls here <tool_ca",
    '<tool_call>{"name": broken}</tool_call> tail',
]


def _assemble(deltas):
    content, calls = "", {}
    for delta in deltas:
        content += delta.get("content", "")
        for entry in delta.get("tool_calls", []):
            call = calls.setdefault(entry["index"], {"name": None, "arguments": "", "id": None})
            if "id" in entry:
                assert entry["id"].startswith("call_") and entry["type"] == "function"
                call["id"] = entry["id"]
                call["name"] = entry["function"]["name"]
            call["arguments"] += entry["function"]["arguments"]
    return content.strip() or None, [(c["name"], json.loads(c["arguments"])) for c in calls.values()]


@pytest.mark.parametrize("text", STREAM_TEXTS)
@pytest.mark.parametrize("template", [HERMES_TEMPLATE, "[TOOL_CALLS]", "<|python_tag|>"])
def test_stream_split_anywhere_matches_whole(text, template):
    tools = ChatTools({"tools": [WEATHER]}, template)
    whole = tools.format.parse(text)
    for cut in range(len(text) + 1):
        for pieces in ([text[:cut], text[cut:]], list(text)):
            deltas = ToolCallDeltas(tools)
            out = [d for piece in pieces for d in deltas.feed(piece)] + deltas.finish()
            assert _assemble(out) == (whole.content, _calls(whole))
            assert deltas.num_calls == len(whole.calls)


def test_stream_holds_back_a_possible_marker():
    deltas = ToolCallDeltas(ChatTools({"tools": [WEATHER]}, HERMES_TEMPLATE))
    assert deltas.feed("text <tool") == [{"content": "text "}]
    assert deltas.feed("_c") == []
    assert deltas.finish() == [{"content": "<tool_c"}]


def test_fallback_history_writes_tool_turns_as_text():
    from sglr.server.tools.fallback_prompt import history_as_text, with_fallback_prompt
    from sglr.server.tools.request import read_tool_request

    tools = read_tool_request({"tools": [WEATHER]}).tools
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "a", "days": 1}'},
    }
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "sunny"},
    ]
    out = with_fallback_prompt(history_as_text(messages), tools)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("Be brief.\n\n") and '"get_weather"' in out[0]["content"]
    assert parse_hermes(out[2]["content"]).calls[0].arguments == {"city": "a", "days": 1}
    assert out[3]["content"] == "<tool_response>\nsunny\n</tool_response>"
    assert all("tool_calls" not in m for m in out)
    without_tools, _ = ChatTools({}, None).render_inputs(messages)  # tool_choice none: no prompt
    assert without_tools == [messages[0], *out[1:]]


@pytest.mark.parametrize(
    "template, special, body, expected",
    [
        ("{{ '[TOOL_CALLS]' }} tools", {"[TOOL_CALLS]"}, {"tools": [WEATHER]}, False),
        ("{{ '[TOOL_CALLS]' }} tools", set(), {"tools": [WEATHER]}, None),
        ("{{ '[TOOL_CALLS]' }} tools", {"[TOOL_CALLS]"}, {"tools": [WEATHER], "tool_choice": "none"}, None),
        (
            "{{ '[TOOL_CALLS]' }} tools",
            {"[TOOL_CALLS]"},
            {"tools": [WEATHER], "skip_special_tokens": True},
            True,
        ),
        ("<|python_tag|> tools", {"<|python_tag|>"}, {"tools": [WEATHER]}, False),
    ],
)
def test_special_token_markers_keep_special_tokens(template, special, body, expected):
    params = {"skip_special_tokens": body["skip_special_tokens"]} if "skip_special_tokens" in body else {}
    ChatTools(body, template).keep_special_tokens(params, special.__contains__)
    assert params.get("skip_special_tokens") == expected
