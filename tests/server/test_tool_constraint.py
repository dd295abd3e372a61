"""The constraint that forces tool calls: a regex for non-recursive schemas, EBNF with each
schema's grammar embedded for recursive ones and for "auto" with strict tools (free text that
never contains the call marker). Checked by compiling with the core and feeding bytes."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import numpy as np
import pytest

from sglr._core import GrammarConstraint, TokenFsm, Vocabulary
from sglr.http.errors import ApiError
from sglr.server.tools.constraint import forced_call_constraint
from sglr.server.tools.formats import HERMES, LLAMA3, MISTRAL
from sglr.server.tools.free_text import free_text_regex, free_text_rules
from sglr.server.tools.request import read_tool_request

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
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 4},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/node",
}
PLANT = {"type": "function", "function": {"name": "plant", "parameters": TREE}}
EOS = 0


def _vocabulary() -> Vocabulary:
    return Vocabulary([None, *[bytes([b]) for b in range(256)]], [EOS])


def _accepts(ebnf: str, text: str) -> bool:
    state = GrammarConstraint.from_ebnf(ebnf, _vocabulary()).start()
    ok = state.advance_bytes(text.encode()) and state.is_accepting
    state.check_invariants()
    return ok


def _constraint_accepts(constraint, text: str) -> bool:
    """Through the core, whichever field the constraint is (its regex dialect is not Python's)."""
    if constraint.field == "ebnf":
        return _accepts(constraint.text, text)
    fsm = TokenFsm.from_regex(constraint.text, _vocabulary())
    state = fsm.advance_bytes(fsm.start_state, text.encode())
    return state is not None and fsm.is_accepting(state)


def _call(fmt, name, arguments):
    return json.dumps({"name": name, fmt.arguments_key: arguments})


@pytest.mark.parametrize("fmt", [HERMES, MISTRAL, LLAMA3])
def test_required_non_recursive_is_a_regex(fmt):
    request = read_tool_request({"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False})
    constraint = forced_call_constraint(request, fmt)
    assert constraint is not None and constraint.field == "regex"
    good = fmt.prefix + _call(fmt, "get_weather", {"city": "Paris", "days": 3}) + fmt.suffix
    assert re.fullmatch(constraint.text, good), (constraint.text, good)
    assert fmt.parse(good).calls[0].arguments == {"city": "Paris", "days": 3}
    assert not re.fullmatch(constraint.text, good.replace("get_weather", "other"))
    assert not re.fullmatch(constraint.text, good.replace("3", '"3"'))


def test_long_strings_and_long_regexes_stay_on_the_regex_path():
    # Past the engine's defaults for a plain `json_schema` (strings bounded past 32 characters,
    # regexes past 4 KiB go to the grammar path there): tool calls keep the regex, since "auto"
    # free text on the grammar path walks nearly the whole vocabulary every step.
    properties = {
        f"field_{i}": {"type": "string", "enum": [f"value_{i}_{j}" for j in range(20)]} for i in range(20)
    }
    properties["note"] = {"type": "string", "maxLength": 100}
    tool = {
        "type": "function",
        "function": {"name": "fill", "parameters": {"type": "object", "properties": properties}},
    }
    request = read_tool_request({"tools": [tool], "tool_choice": "required", "parallel_tool_calls": False})
    constraint = forced_call_constraint(request, HERMES)
    assert constraint is not None and constraint.field == "regex" and len(constraint.text) > 4 << 10
    call = HERMES.prefix + _call(HERMES, "fill", {"note": "x" * 100}) + HERMES.suffix
    assert _constraint_accepts(constraint, call)
    assert not _constraint_accepts(constraint, call.replace("x" * 100, "x" * 101))


def test_parallel_calls_repeat_and_auto_without_strict_is_free():
    assert forced_call_constraint(read_tool_request({"tools": [WEATHER]}), HERMES) is None
    constraint = forced_call_constraint(
        read_tool_request({"tools": [WEATHER], "tool_choice": "required"}), HERMES
    )
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "a", "days": 1}}\n</tool_call>'
    assert re.fullmatch(constraint.text, call + "\n" + call)


@pytest.mark.parametrize("fmt", [HERMES, MISTRAL, LLAMA3])
def test_a_recursive_schema_goes_through_the_grammar(fmt):
    body = {"tools": [WEATHER, PLANT], "tool_choice": "required"}
    constraint = forced_call_constraint(read_tool_request(body), fmt)
    assert constraint is not None and constraint.field == "ebnf"
    deep = {
        "name": "a",
        "children": [{"name": "b", "children": [{"name": "c", "children": [{"name": "d"}]}]}],
    }
    one = _call(fmt, "plant", deep)
    two = _call(fmt, "get_weather", {"city": "x", "days": 2})
    assert _accepts(constraint.text, fmt.prefix + one + fmt.suffix)
    assert _accepts(constraint.text, fmt.prefix + one + fmt.separator + two + fmt.suffix)
    assert [c.arguments for c in fmt.parse(fmt.prefix + one + fmt.suffix).calls] == [deep]
    for bad in (
        _call(fmt, "plant", {"name": "too long"}),
        _call(fmt, "plant", {"children": []}),
        _call(fmt, "plant", {"name": "a", "children": [{"name": 1}]}),
        _call(fmt, "other", deep),
    ):
        assert not _accepts(constraint.text, fmt.prefix + bad + fmt.suffix), bad
    assert not _accepts(constraint.text, "plain text")


def test_named_recursive_call_alone():
    body = {"tools": [WEATHER, PLANT], "tool_choice": {"type": "function", "function": {"name": "plant"}}}
    constraint = forced_call_constraint(read_tool_request({**body, "parallel_tool_calls": False}), HERMES)
    call = HERMES.prefix + _call(HERMES, "plant", {"name": "a"}) + HERMES.suffix
    assert _accepts(constraint.text, call)
    assert not _accepts(
        constraint.text, call + HERMES.separator[len(HERMES.suffix) :] + call[len(HERMES.prefix) :]
    )
    other = HERMES.prefix + _call(HERMES, "get_weather", {"city": "x", "days": 2}) + HERMES.suffix
    assert not _accepts(constraint.text, other)


@pytest.mark.parametrize("fmt", [HERMES, MISTRAL, LLAMA3])
@pytest.mark.parametrize("recursive", [False, True], ids=["regex", "grammar"])
def test_auto_with_strict_tools_allows_text_or_valid_calls(fmt, recursive):
    strict = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
    tools = (
        [strict, {"type": "function", "function": {**PLANT["function"], "strict": True}}]
        if recursive
        else [strict]
    )
    constraint = forced_call_constraint(read_tool_request({"tools": tools}), fmt)
    assert constraint is not None and constraint.field == ("ebnf" if recursive else "regex")
    call = fmt.prefix + _call(fmt, "get_weather", {"city": "Paris", "days": 3}) + fmt.suffix
    assert _constraint_accepts(constraint, "It is sunny.")
    assert _constraint_accepts(constraint, "")
    assert _constraint_accepts(constraint, "  \n")
    assert _constraint_accepts(constraint, call)
    bad_call = fmt.prefix + _call(fmt, "get_weather", {"city": "Paris"}) + fmt.suffix
    assert not _constraint_accepts(constraint, bad_call)
    if fmt.marker:
        assert _constraint_accepts(constraint, "Let me check. " + call)
        assert not _constraint_accepts(constraint, "text " + fmt.marker + " more text")
    else:
        assert not _constraint_accepts(constraint, ' {"not": "a call"}')


@pytest.mark.parametrize("marker", ["<tool_call>", "[TOOL_CALLS]", "aab", "abab", '"/\\'])
def test_free_text_is_exactly_the_text_without_the_marker(marker):
    """Random strings over the marker's alphabet plus other characters: the grammar rule and
    the regex (as an FSM) both accept exactly those that do not contain the marker."""
    ebnf = "root ::= free\n" + free_text_rules("free", marker)
    grammar = GrammarConstraint.from_ebnf(ebnf, _vocabulary())
    fsm = TokenFsm.from_regex(free_text_regex(marker), _vocabulary())
    rng = random.Random(0)
    alphabet = [*sorted(set(marker)), "x", "\n"]
    seen = {True: 0, False: 0}
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3 * len(marker))))
        if rng.random() < 0.3:
            cut = rng.randint(0, len(text))
            text = text[:cut] + marker + text[cut:]
        state = grammar.start()
        accepted = state.advance_bytes(text.encode()) and state.is_accepting
        assert accepted == (marker not in text), text
        fsm_state = fsm.advance_bytes(fsm.start_state, text.encode())
        assert (fsm_state is not None and fsm.is_accepting(fsm_state)) == accepted, text
        seen[accepted] += 1
    assert seen[True] and seen[False]


def test_schema_errors_name_the_tool_parameters():
    bad = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
        },
    }
    for tools in ([bad], [PLANT, bad]):
        with pytest.raises(ApiError) as info:
            forced_call_constraint(read_tool_request({"tools": tools, "tool_choice": "required"}), HERMES)
        assert info.value.param == f"tools[{len(tools) - 1}].function.parameters"


def test_a_schema_the_regex_path_refuses_goes_through_the_grammar():
    """`minProperties` over optional properties (refused by the regex path) is compiled by the
    grammar path, as for a plain `json_schema`: calls with two or more members pass, fewer not."""
    pair = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "minProperties": 2,
        "additionalProperties": False,
    }
    tool = {"type": "function", "function": {"name": "pick", "parameters": pair}}
    constraint = forced_call_constraint(
        read_tool_request({"tools": [tool], "tool_choice": "required"}), HERMES
    )
    assert constraint is not None and constraint.field == "ebnf"

    def wrap(arguments: dict) -> str:
        return HERMES.prefix + _call(HERMES, "pick", arguments) + HERMES.suffix

    for arguments in ({"a": 1, "b": 2}, {"a": 1, "c": 3}, {"a": 1, "b": 2, "c": 3}):
        assert _accepts(constraint.text, wrap(arguments)), arguments
    for arguments in ({}, {"b": 2}, {"a": 1, "b": "x"}, {"a": 1, "d": 2}):
        assert not _accepts(constraint.text, wrap(arguments)), arguments


def test_a_recursive_schema_the_grammar_cannot_print_is_refused_by_keyword():
    """`multipleOf` beside a `$ref` cycle compiles to an automaton with no regex text, which an
    embedded EBNF grammar cannot carry: a 400 naming the tool's parameters and the keyword."""
    counted = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "multipleOf": 7},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
                },
            }
        },
        "$ref": "#/$defs/n",
    }
    tool = {"type": "function", "function": {"name": "count", "parameters": counted}}
    with pytest.raises(ApiError, match="multipleOf") as info:
        forced_call_constraint(read_tool_request({"tools": [tool], "tool_choice": "required"}), HERMES)
    assert info.value.param == "tools[0].function.parameters"


def test_grammar_calls_validate_against_the_schema():
    """Random walks through the grammar's allowed bytes: every finished call validates."""
    body = {"tools": [PLANT], "tool_choice": "required", "parallel_tool_calls": False}
    constraint = forced_call_constraint(read_tool_request(body), HERMES)
    grammar = GrammarConstraint.from_ebnf(constraint.text, _vocabulary())
    rng = random.Random(1)
    finished = 0
    for _ in range(40):
        state, out = grammar.start(), bytearray()
        for _ in range(400):
            if state.is_accepting:
                break
            mask = np.zeros(_vocabulary().num_mask_words, dtype=np.int32)
            state.fill_bitmask(mask)
            allowed = [t for t in range(1, 257) if (int(mask[t // 32]) >> (t % 32)) & 1]
            # Prefer closing brackets as the text grows so walks end.
            closers = [t for t in allowed if bytes([t - 1]) in b']}"']
            token = rng.choice(closers if closers and len(out) > 60 and rng.random() < 0.7 else allowed)
            assert state.try_advance(token)
            out.append(token - 1)
        if state.is_accepting:
            finished += 1
            parsed = HERMES.parse(out.decode())
            assert len(parsed.calls) == 1 and parsed.calls[0].name == "plant"
            jsonschema.validate(parsed.calls[0].arguments, TREE)
    assert finished >= 10


def test_a_bad_schema_is_refused_even_when_no_call_is_forced():
    from sglr.server.tools.chat import ChatTools

    bad = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}},
    }
    with pytest.raises(ApiError) as info:
        ChatTools({"tools": [WEATHER, bad]}, None)
    assert info.value.param == "tools[1].function.parameters"
    ChatTools({"tools": [bad], "tool_choice": "none"}, None)  # not shown: not compiled
