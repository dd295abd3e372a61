"""The OpenAI routes' declared fields (`/v1/completions`, `/v1/chat/completions`) as `Field`s
(see `fuzz_fields.py`): the sampling fields both share, then each route's own."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from fuzz_fields import (
    BAD_EBNF,
    BAD_INTS,
    BAD_REGEXES,
    BAD_SCHEMAS,
    BAD_STOP_IDS,
    BAD_STOPS,
    BAD_TAGS,
    BAD_TOP_K,
    EMPTY_VALUES,
    GOOD_EBNF,
    GOOD_REGEXES,
    GOOD_SCHEMAS,
    GOOD_TAGS,
    NON_EMPTY_VALUES,
    NONEMPTY_TEXT,
    STOP_IDS,
    STOPS,
    TOKEN_IDS,
    VOCAB_SIZE,
    Field,
    RouteFields,
    bools,
    number,
)
from fuzz_support import ANY_JSON, LONE_SURROGATES, Raw, nested, wrong_types


def _ints(name: str, valid: st.SearchStrategy[int], bad: list, **kwargs) -> Field:
    return Field(name, valid, st.sampled_from(bad) | wrong_types("int", "null") | BAD_INTS, **kwargs)


def _response_formats() -> Field:
    def schema_format(schema: object) -> dict:
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}

    def tag_format(tag: dict) -> dict:
        return {**tag, "type": "structural_tag"}

    valid = (
        st.sampled_from([{"type": "text"}, {"type": "json_object"}])
        | GOOD_SCHEMAS.map(schema_format)
        | GOOD_TAGS.map(tag_format)
    )
    invalid = (
        st.sampled_from(
            [
                {"type": "xml"},
                5,
                {"type": "json_schema"},
                {"type": "json_schema", "json_schema": 5},
                {"type": "json_schema", "json_schema": {"schema": 5}},
                {"type": None},
                {},
            ]
        )
        | BAD_SCHEMAS.map(schema_format)
        | BAD_TAGS.map(tag_format)
    )
    return Field("response_format", valid, invalid, group="grammar")


SAMPLING = (
    number("temperature", 0.0, 2.0, [2.5, -1]),
    number("top_p", 0.01, 1.0, [0, 1.5, -1]),
    _ints("n", st.integers(1, 2), [0, 129, -1, 10**9]),
    Field("stop", STOPS, BAD_STOPS),
    _ints("seed", st.integers(-(2**63), 2**63 - 1), [2**63, -(2**63) - 1, "1"]),
    number("presence_penalty", -2.0, 2.0, [3, -2.5]),
    number("frequency_penalty", -2.0, 2.0, [3, -2.5]),
    Field(
        "logit_bias",
        st.dictionaries(st.integers(0, VOCAB_SIZE - 1).map(str), st.floats(-100, 100), max_size=2),
        st.sampled_from(
            [
                {"a": 1},
                {"1": 500},
                {"1": "x"},
                {"99999": 1},
                {"1": Raw("1e400")},
                {"1": Raw("1" + "0" * 400)},
                {"1": True},
                5,
                [1],
            ]
        ),
    ),
    bools("stream"),
    Field(
        "stream_options",
        st.fixed_dictionaries(
            {}, optional={"include_usage": st.booleans(), "continuous_usage_stats": st.booleans()}
        ),
        st.sampled_from([5, "x", [1], {"bogus": 1}, {"include_usage": 1}, {"continuous_usage_stats": "no"}]),
        requires={"stream": True},
    ),
    _response_formats(),
    *(Field(name, ANY_JSON) for name in ("user", "metadata", "store", "service_tier")),
    Field("top_k", st.sampled_from([-1, 1, 5, 10**30]), BAD_TOP_K),
    number("min_p", 0.0, 1.0, [2, -0.5]),
    _ints("min_tokens", st.integers(0, 1), [-1, 10**6]),
    number("repetition_penalty", 0.01, 2.0, [0, 2.5]),
    Field("stop_token_ids", STOP_IDS, BAD_STOP_IDS),
    *(
        bools(name)
        for name in (
            "ignore_eos",
            "skip_special_tokens",
            "spaces_between_special_tokens",
            "no_stop_trim",
            "json_schema_any_order",
        )
    ),
    Field("regex", GOOD_REGEXES, BAD_REGEXES | st.just(5), group="grammar"),
    Field("ebnf", GOOD_EBNF, BAD_EBNF | st.just(5), group="grammar"),
    Field("rid", st.uuids().map(str), wrong_types("str", "null")),
    Field(
        "model",
        st.none(),
        st.sampled_from(["no-such-model", 5, ["a"], "", "\ud800", "default:no-such-adapter"]),
    ),
    # SGLang's extension; the fuzzed server serves no adapters, so any name is refused.
    Field("lora_path", st.none(), st.sampled_from(["no-such-adapter", "", 5, True, [1], {"a": 1}])),
)
PROMPTS = (
    NONEMPTY_TEXT
    | st.lists(NONEMPTY_TEXT, min_size=1, max_size=3)
    | TOKEN_IDS
    | st.lists(TOKEN_IDS, min_size=1, max_size=2)
)
BAD_PROMPTS = LONE_SURROGATES | st.sampled_from(
    [
        "",
        [],
        [""],
        [[1], []],
        [1.5],
        {},
        5,
        True,
        ["a\ud800"],
        [VOCAB_SIZE],
        [[1, -1]],
        [-3],
        [2**40],
        [["a"]],
        [1, "a"],
    ]
)

COMPLETIONS = RouteFields(
    "/v1/completions",
    base={"prompt": "hello", "max_tokens": 3},
    fields=(
        *SAMPLING,
        Field("prompt", PROMPTS, BAD_PROMPTS),
        _ints("max_tokens", st.integers(1, 6), [-1, 10**30]),
        bools("echo"),
        _ints("logprobs", st.integers(0, 3), [21, -1]),
        Field("suffix", st.sampled_from([None, ""]), st.sampled_from(["x", 5, ["a"]])),
        Field("best_of", st.just(1), st.sampled_from([3, 0, -1, "1"]), requires={"n": 1}),
        Field(
            "json_schema",
            GOOD_SCHEMAS | GOOD_SCHEMAS.map(json.dumps),
            BAD_SCHEMAS | st.sampled_from(["{oops", 5, [1], "[1,"]),
            group="grammar",
        ),
    ),
    bounds=(("max_tokens", 2),),
)

_TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
}
_BAD_TOOLS = [
    "x",
    5,
    [5],
    [{"type": "function"}],
    [{"type": "function", "function": {"name": "bad name"}}],
    [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}],
    [{"type": "function", "function": {"name": "f", "description": 5}}],
    [{"type": "function", "function": {"name": "f", "strict": "yes"}}],
    [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"q": {"type": "nope"}}},
            },
        }
    ],
    [_TOOL, _TOOL],
    [{"type": "code", "function": {"name": "f"}}],
    [{"type": "function", "function": {"name": ""}}],
    [{"type": "function", "function": {"name": "f", "parameters": nested(300, "dict")}}],
]
CONTENT = NONEMPTY_TEXT | st.lists(
    NONEMPTY_TEXT.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=2
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "USER"]), "content": CONTENT}
)
BAD_MESSAGES = st.sampled_from(
    [
        "hi",
        [],
        [5],
        [{"role": "x", "content": "a"}],
        [{"role": "user"}],
        [{"role": "user", "content": 5}],
        [{"role": 5, "content": "a"}],
        [{"content": "a"}],
        [{"role": "user", "content": [5]}],
        [{"role": "user", "content": [{"type": "text"}]}],
        [{"role": "user", "content": [{"type": "audio"}]}],
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}],
            }
        ],
        [{"role": "user", "content": "a\ud800"}],
        [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}],
        [{"role": "user", "content": {"text": "a"}}],
        {"role": "user", "content": "a"},
        [None],
    ]
)
_RESERVED_TEMPLATE_ARGS = [
    {"add_generation_prompt": False},
    {"tokenize": True},
    {"return_dict": True},
    {"messages": []},
    {"conversation": []},
    {"chat_template": "{{ 1/0 }}"},
    {"tools": 5},
    {"continue_final_message": True},
]

CHAT = RouteFields(
    "/v1/chat/completions",
    base={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3},
    fields=(
        *SAMPLING,
        Field("messages", st.lists(MESSAGE, min_size=1, max_size=3), BAD_MESSAGES),
        _ints("max_completion_tokens", st.integers(1, 6), [0, -1, 10**30], group="max"),
        _ints("max_tokens", st.integers(1, 6), [0, -1, 10**30], group="max"),
        bools("logprobs"),
        _ints("top_logprobs", st.integers(0, 3), [21, -1], requires={"logprobs": True}),
        Field("tools", st.just([_TOOL]) | st.just([]), st.sampled_from(_BAD_TOOLS), group="tools"),
        Field(
            "tool_choice",
            st.sampled_from(["auto", "none"]),
            st.sampled_from(
                ["sometimes", 5, {"type": "function", "function": {"name": "nope"}}, "required", [], {}]
            ),
            group="tools",
        ),
        bools("parallel_tool_calls"),
        *(
            Field(name, EMPTY_VALUES, NON_EMPTY_VALUES)
            for name in ("functions", "function_call", "audio", "prediction")
        ),
        Field(
            "chat_template_kwargs",
            st.sampled_from([{}, {"enable_thinking": False}, {"custom_flag": 1}]),
            st.sampled_from([5, "x", [1], *_RESERVED_TEMPLATE_ARGS]),
        ),
        Field(
            "modalities",
            st.sampled_from([None, ["text"]]),
            st.sampled_from([["audio"], 5, "text", [], ["text", "audio"]]),
        ),
        Field("reasoning_effort", ANY_JSON),
        bools("separate_reasoning"),
        bools("stream_reasoning"),
    ),
    bounds=(("max_completion_tokens", 2),),
)
