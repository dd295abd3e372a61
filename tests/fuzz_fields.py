"""Request bodies generated from each generation route's declared fields: a `Field` says which
values the route takes and which it must refuse naming that field; `valid_body` draws a body the
route must answer, `bad_body` one with exactly one field wrong, `wild_body` any JSON under the
route's field names. The native route's fields are here, the OpenAI routes' in
`fuzz_openai_fields.py`. Strategies only: the tests send them (`tests/server/test_fuzz_*.py`,
`tests/router/test_fuzz_router.py`).

Generation stays cheap whatever is drawn: valid bodies ask for a few tokens, and the fuzzed
server's context is short (`FUZZ_CONTEXT_LEN`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from fuzz_support import ANY_JSON, LONE_SURROGATES, TEXT, Raw, encode, nested, wrong_types

VOCAB_SIZE = 4096  # the tiny test model's (checked against /model_info by the tests)
FUZZ_CONTEXT_LEN = 1024
NONEMPTY_TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=24)
TOKEN_IDS = st.lists(st.integers(0, VOCAB_SIZE - 1), min_size=1, max_size=12)
# Integers out of every range, and numbers that are not integers at all.
BAD_INTS = st.sampled_from([Raw("1e400"), Raw("-1e400"), Raw("1" + "0" * 400), 2**64, -(2**63) - 1, 0.5])
BAD_FLOATS = st.sampled_from([Raw("1e400"), Raw("-1e400"), Raw("1" + "0" * 400), Raw("-" + "9" * 400)])


@dataclass(frozen=True)
class Field:
    """`name` is a body key, or `outer.inner` for a key of a nested object (`sampling_params`).
    `param` is what an error about it names (default `name`). `group`: at most one field of a
    group in a body. `requires`: other keys set with it (`top_logprobs` needs `logprobs`).
    `replaces`: base keys it stands in for (`input_ids` for `text`)."""

    name: str
    valid: st.SearchStrategy[Any]
    invalid: st.SearchStrategy[Any] | None = None
    param: str | None = None
    group: str | None = None
    requires: dict[str, Any] = field(default_factory=dict)
    replaces: tuple[str, ...] = ()

    @property
    def error_param(self) -> str:
        return self.param or self.name


@dataclass(frozen=True)
class RouteFields:
    path: str
    base: dict[str, Any]  # the smallest body the route answers
    fields: tuple[Field, ...]
    # Keys under which a free-form body keeps generation short: (key, value).
    bounds: tuple[tuple[str, Any], ...]

    def names(self) -> list[str]:
        return sorted({f.name.split(".")[0] for f in self.fields} | set(self.base))


def put(body: dict[str, Any], name: str, value: Any) -> None:
    value = copy.deepcopy(value)  # a drawn value may be shared (`st.just`, `sampled_from`)
    outer, _, inner = name.partition(".")
    if inner:
        body.setdefault(outer, {})[inner] = value
    else:
        body[outer] = value


def _assemble(draw: Any, route: RouteFields, chosen: list[Field], exclude: Field | None) -> dict[str, Any]:
    body = copy.deepcopy(route.base)
    groups = {exclude.group} if exclude is not None and exclude.group else set()
    taken = [exclude] if exclude is not None else []
    for f in chosen:
        if f is exclude or f.name == (exclude.name if exclude else None) or (f.group and f.group in groups):
            continue
        if f.group:
            groups.add(f.group)
        taken.append(f)
        put(body, f.name, draw(f.valid))
    for f in taken:
        for key in f.replaces:
            body.pop(key, None)
        for key, value in f.requires.items():
            put(body, key, value)
    return body


@st.composite
def valid_body(draw: Any, route: RouteFields) -> dict[str, Any]:
    """A body of the route's base and a few valid fields: the route must answer it."""
    chosen = draw(st.lists(st.sampled_from(route.fields), max_size=5, unique_by=lambda f: f.name))
    return _assemble(draw, route, chosen, None)


@st.composite
def bad_body(draw: Any, route: RouteFields) -> tuple[dict[str, Any], str]:
    """A valid body with one field set to a value the route must refuse; and that field's name."""
    bad = draw(st.sampled_from([f for f in route.fields if f.invalid is not None]))
    others = draw(st.lists(st.sampled_from(route.fields), max_size=3, unique_by=lambda f: f.name))
    body = _assemble(draw, route, others, bad)
    assert bad.invalid is not None
    put(body, bad.name, draw(bad.invalid))
    return body, bad.error_param


@st.composite
def wild_body(draw: Any, route: RouteFields) -> dict[str, Any]:
    """The route's field names (and a few others) with any JSON values, generation kept short."""
    keys = st.sampled_from(route.names()) | TEXT
    body = draw(st.dictionaries(keys, ANY_JSON, max_size=6))
    for key, value in route.bounds:
        outer, _, inner = key.partition(".")
        if not inner:
            body[key] = value
        elif isinstance(body.setdefault(outer, {}), dict):
            body[outer][inner] = value
    return body


def unknown_key(known: list[str]) -> st.SearchStrategy[str]:
    return st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(lambda k: k not in known)


# -- shared field values --------------------------------------------------------------------


def bools(name: str, param: str | None = None) -> Field:
    return Field(name, st.booleans(), wrong_types("bool", "null"), param)


def number(
    name: str, low: float, high: float, bad: list[float], param: str | None = None, group: str | None = None
) -> Field:
    invalid = st.sampled_from(bad) | wrong_types("int", "float", "null") | BAD_FLOATS
    return Field(name, st.floats(low, high), invalid, param, group)


GOOD_SCHEMAS = st.sampled_from(
    [
        {"type": "string", "maxLength": 4},
        {"type": "integer", "minimum": 0, "maximum": 9},
        {"enum": ["a", "b"]},
        {"type": "boolean"},
        {"type": "array", "items": {"type": "null"}, "maxItems": 2},
    ]
)
BAD_SCHEMAS = st.sampled_from(
    [
        {"type": "no-such-type"},
        {"not": {}},
        {"type": "string", "minLength": 5, "maxLength": 2},
        {"type": "integer", "minimum": Raw("1e400")},
        {"$ref": "#/nowhere"},
        {"pattern": "("},
        {"type": "object", "required": 5},
        {"allOf": 5},
        nested(400, "dict"),
    ]
)
GOOD_REGEXES = st.sampled_from(["[ab]{1,3}", "x|y", "[0-9]+", "\\d\\d?"])
# (Not a regex over the automaton limits: finding that out takes seconds.)
BAD_REGEXES = st.sampled_from(["(a", "(?=a)b", "\\1", "[z-a]", "(" * 10000 + ")" * 10000, "a{5,2}"])
GOOD_EBNF = st.sampled_from(["root ::= 'a' | 'b'", "root ::= item+\nitem ::= [0-9]", "root: /[a-c]{1,2}/"])
BAD_EBNF = st.sampled_from(
    [
        "root ::= (",
        "root ::= undefined",
        "root ::= 'a'\nitem ::= (",
        "::=",
        "root ::= " + "(" * 100_000 + "'a'" + ")" * 100_000,
        "root ::= 'a'" + "?" * 100_000,
        "a ::= 'x' | 'a' a\nroot ::= a{1000}{1000}{1000}",
        "root ::= [^\\x00-\\U0010FFFF]",
    ]
)
_TAG = {"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}], "triggers": ["<a"]}
GOOD_TAGS = st.sampled_from(
    [
        _TAG,
        {**_TAG, "type": "structural_tag"},
        {
            "structures": [{"begin": "[x]", "schema": {"type": "string", "maxLength": 2}, "end": ""}],
            "triggers": ["["],
        },
    ]
)
# Objects, so that OpenAI's `response_format` can carry them too (with its `type`).
BAD_TAGS = st.sampled_from(
    [
        {**_TAG, "triggers": ["<a", "<b"]},
        {**_TAG, "triggers": []},
        {**_TAG, "triggers": ["<", "<a"]},
        {"structures": [{"begin": "<a>", "end": ""}], "triggers": ["<"]},
        {"structures": [], "triggers": []},
        {"structures": 5, "triggers": []},
        {"format": {"type": "any_text"}},
        {**_TAG, "extra": 1},
        {**_TAG, "structures": [{"begin": "<a>", "schema": {"type": "nope"}, "end": ""}]},
    ]
)
# Any top_k from 1 up is valid (past the vocabulary: no cut).
BAD_TOP_K = st.sampled_from([0, -2, 0.5, Raw("1e400"), Raw("-" + "9" * 400)]) | wrong_types("int", "null")
STOPS = NONEMPTY_TEXT | st.lists(NONEMPTY_TEXT, min_size=1, max_size=3)
BAD_STOPS = st.sampled_from([7, [1], [""], "", ["s"] * 33, {"a": "b"}, [None]])
STOP_IDS = st.lists(st.integers(0, VOCAB_SIZE - 1), max_size=3)
BAD_STOP_IDS = st.sampled_from([[-1], [VOCAB_SIZE], [10**20], ["a"], 5, [1.5], "1"])


def _native_sampling() -> tuple[Field, ...]:
    def sp(name: str) -> str:
        return f"sampling_params.{name}"

    fields = [
        Field(
            sp("max_new_tokens"),
            st.integers(1, 6),
            st.sampled_from([-1, 10**30]) | wrong_types("int", "null") | BAD_INTS,
        ),
        Field(
            sp("min_new_tokens"),
            st.integers(0, 1),
            st.sampled_from([-1, 10**6]) | wrong_types("int", "null") | BAD_INTS,
        ),
        # A greedy temperature sets top_k to 1 before anything is checked, as SGLang does: with
        # one, any top_k is taken.
        number(sp("temperature"), 0.0, 2.0, [-0.5, -1e-9], group="greedy"),
        number(sp("top_p"), 0.01, 1.0, [0, 1.5, -1]),
        Field(sp("top_k"), st.sampled_from([-1, 1, 5, 50, 10**30]), BAD_TOP_K, group="greedy"),
        number(sp("min_p"), 0.0, 1.0, [1.5, -0.1]),
        number(sp("frequency_penalty"), -2.0, 2.0, [2.5, -3]),
        number(sp("presence_penalty"), -2.0, 2.0, [2.5, -3]),
        number(sp("repetition_penalty"), 0.01, 2.0, [0, 2.5, -1]),
        Field(
            sp("n"),
            st.integers(1, 2),
            st.sampled_from([0, -1, 10**9]) | wrong_types("int", "null") | BAD_INTS,
        ),
        Field(sp("stop"), STOPS, BAD_STOPS),
        Field(sp("stop_token_ids"), STOP_IDS, BAD_STOP_IDS),
        Field(
            sp("stop_regex"),
            st.sampled_from(["a+", ["b", "c[0-9]"]]),
            st.sampled_from(["(a", [1], "x" * 300, 5, [""]]),
        ),
        Field(
            sp("json_schema"),
            GOOD_SCHEMAS.map(_json_text),
            BAD_SCHEMAS.map(_json_text) | st.sampled_from(["{not json", 5, "[1,"]),
            group="grammar",
        ),
        Field(sp("regex"), GOOD_REGEXES, BAD_REGEXES | st.just(5), group="grammar"),
        Field(sp("ebnf"), GOOD_EBNF, BAD_EBNF | st.just(5), group="grammar"),
        Field(
            sp("reasoning_close_tag"), st.sampled_from(["</think>", "x"]), st.sampled_from(["", "x" * 65, 5])
        ),
        Field(
            sp("structural_tag"),
            GOOD_TAGS.map(json.dumps),
            BAD_TAGS.map(json.dumps) | st.sampled_from(["{not json", "[1]", 5]),
            group="grammar",
        ),
        Field(
            sp("logit_bias"),
            st.dictionaries(st.integers(0, VOCAB_SIZE - 1).map(str), st.floats(-100, 100), max_size=2),
            BAD_NATIVE_BIAS,
        ),
        Field(
            sp("seed"),
            st.integers(-(2**63), 2**63 - 1),
            st.sampled_from([2**64, -(2**63) - 1, 1.5, "1"]) | BAD_FLOATS,
        ),
        *(
            bools(sp(name))
            for name in (
                "ignore_eos",
                "skip_special_tokens",
                "spaces_between_special_tokens",
                "no_stop_trim",
                "json_schema_any_order",
            )
        ),
    ]
    return tuple(fields)


def _json_text(schema: Any) -> Any:
    return encode(schema).decode() if isinstance(schema, (dict, list)) else schema


BAD_NATIVE_BIAS = st.sampled_from(
    [
        {"99999": 1},
        {"-1": 1},
        {"a": 1},
        {"1": "x"},
        {"1": None},
        {"1": "nan"},
        {"1": "inf"},
        {"1": Raw("1e400")},
        {"1": Raw("1" + "0" * 400)},
        5,
        [1],
    ]
)
_UNSUPPORTED_NATIVE = (
    "audio_data",
    "input_embeds",
    "lora_id",
    "custom_logit_processor",
    "return_hidden_states",
    "return_entropy",
    "token_ids_logprob",
    "return_prompt_token_ids",
)
_IGNORED_NATIVE = ("log_metrics", "modalities", "custom_labels", "routing_key", "conversation_id")
EMPTY_VALUES = st.sampled_from([None, False, "", [], {}])
NON_EMPTY_VALUES = st.sampled_from([1, 0, True, "x", [1], {"a": 1}, 0.5])
_NATIVE_KNOWN = [
    "text",
    "input_ids",
    "sampling_params",
    "rid",
    "stream",
    "return_logprob",
    "logprob_start_len",
    "top_logprobs_num",
    "return_text_in_logprobs",
    "image_data",
    "video_data",
    "lora_path",
    "priority",
    "session_params",
    *_UNSUPPORTED_NATIVE,
    *_IGNORED_NATIVE,
    "extra_key",
    "cache_salt",
    "no_logs",
    "background",
    "data_parallel_rank",
    "routed_dp_rank",
    "bootstrap_host",
    "bootstrap_port",
    "bootstrap_room",
    "bootstrap_pair_key",
]

NATIVE = RouteFields(
    "/generate",
    base={"text": "hello", "sampling_params": {"max_new_tokens": 3}},
    fields=(
        Field(
            "text",
            NONEMPTY_TEXT | st.lists(NONEMPTY_TEXT, min_size=1, max_size=3),
            wrong_types("str", "list")
            | LONE_SURROGATES
            | st.sampled_from([[], [1], [None], ["a\ud800"], [["a"]]]),
            group="prompt",
        ),
        Field(
            "input_ids",
            TOKEN_IDS | st.lists(TOKEN_IDS, min_size=1, max_size=3),
            st.sampled_from(
                [[], [-1], [VOCAB_SIZE], [2**70], ["a"], [1.5], [[1], "x"], [[]], "abc", 5, {"a": 1}, [True]]
            ),
            group="prompt",
            replaces=("text",),
        ),
        Field("sampling_params", st.just({"max_new_tokens": 2}), st.sampled_from(["hot", 5, True, [1]])),
        # (Duplicates: refused whatever the prompts and n; two distinct ids fit two sequences.)
        Field("rid", st.uuids().map(str), wrong_types("str", "null", "list") | st.just(["a", "a"])),
        bools("stream"),
        bools("return_logprob"),
        bools("return_text_in_logprobs"),
        # (A list gives one value per prompt.)
        Field(
            "logprob_start_len",
            st.integers(-1, 0),
            wrong_types("int", "null", "list") | st.sampled_from([Raw("1e400"), ["x"]]),
        ),
        Field(
            "top_logprobs_num",
            st.integers(0, 3),
            st.sampled_from([-1, Raw("1e400"), "1", ["x"]]) | wrong_types("int", "null", "list"),
        ),
        Field(
            "image_data",
            st.none(),
            st.sampled_from(["aGVsbG8=", "http://127.0.0.1/x.png", 5, ["aGVsbG8="], "/etc/passwd", [[5]]]),
        ),
        Field(
            "video_data", st.none(), st.sampled_from(["aGVsbG8=", [["aGVsbG8="]], 5, "file:///etc/passwd"])
        ),
        # An adapter name, or one per prompt; the fuzzed server serves none, so any is refused.
        Field("lora_path", st.none(), st.sampled_from(["no-such-adapter", "", 5, True, [], [1], {"a": 1}])),
        # Accepted and ignored: the fuzzed server runs without priority scheduling.
        Field(
            "priority",
            st.none() | st.integers(-3, 3),
            st.sampled_from(["high", 1.5, True, ["x"], {"a": 1}, 2**70]),
        ),
        # The fuzzed server has no session open: any session is unknown.
        Field(
            "session_params",
            st.none(),
            st.sampled_from(
                [{"id": "no-such-session"}, {"id": ""}, {"rid": "x"}, "s", 5, [1], {"id": "s", "x": 1}]
            ),
        ),
        *(Field(name, EMPTY_VALUES, NON_EMPTY_VALUES) for name in _UNSUPPORTED_NATIVE),
        *(Field(name, ANY_JSON) for name in _IGNORED_NATIVE),
        *_native_sampling(),
    ),
    bounds=(("sampling_params.max_new_tokens", 2),),
)
NATIVE_UNKNOWN = unknown_key(_NATIVE_KNOWN)
NATIVE_UNKNOWN_SAMPLING = unknown_key(
    [f.name.split(".")[1] for f in NATIVE.fields if "." in f.name] + ["sampling_seed"]
)
