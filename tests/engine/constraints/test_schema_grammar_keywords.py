"""JSON-schema keywords the regex path refuses, through the grammar path, checked against
`jsonschema`: documents from random walks under the token mask must validate (no false
accept), hand-written valid documents are accepted, and mutants of them are accepted only when
`jsonschema` agrees. Keywords still unsupported are refused with a typed error naming them."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from sglr._core import GrammarConstraint, Vocabulary, fill_grammar_bitmasks
from sglr.errors import UnsupportedSchemaError

SCHEMAS: dict[str, tuple[dict, list]] = {
    # Fractional divisors and bounds (binary-exact ones, so `jsonschema`'s float arithmetic agrees).
    "decimal_multiples": (
        {
            "type": "object",
            "properties": {
                "quarter": {"type": "number", "multipleOf": 0.25, "exclusiveMinimum": -2.5, "maximum": 40.5},
                "half": {"type": "number", "multipleOf": 0.5},
                "count": {"type": "number", "multipleOf": 3},
            },
            "required": ["quarter", "half", "count"],
        },
        [{"quarter": -2.25, "half": 7.5, "count": 9.0}, {"quarter": 40.5, "half": -1, "count": -3}],
    ),
    "pattern_properties": (
        {
            "type": "object",
            "properties": {"x_id": {"type": "integer", "minimum": 0}},
            "patternProperties": {"^x_": {"type": "integer"}, "id$": {"maximum": 9}},
            "additionalProperties": {"type": "string", "maxLength": 3},
        },
        [{"x_id": 3}, {"x_id": 0, "x_b": 100, "bid": 2.5, "z": "abc"}, {}],
    ),
    "closed_pattern_properties": (
        {
            "type": "object",
            "patternProperties": {"^[a-c]+$": {"enum": [1, "two", None]}},
            "additionalProperties": False,
            "minProperties": 1,
        },
        [{"a": 1}, {"ab": "two", "c": None}],
    ),
    "property_counts": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
            "required": ["a"],
            "minProperties": 2,
            "maxProperties": 3,
        },
        [{"a": 1, "b": True}, {"a": 1, "zz": [1, {"q": None}]}, {"a": 1, "b": False, "c": "x"}],
    ),
    "property_names": (
        {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3},
            "additionalProperties": {"type": "integer"},
        },
        [{}, {"abc": 1, "q": -2}],
    ),
    "string_lengths_with_pattern": (
        {
            "type": "array",
            "items": {"type": "string", "pattern": "^[a-f0-9]+$", "minLength": 2, "maxLength": 4},
            "maxItems": 3,
        },
        [[], ["ab", "0f0f"], ["123", "ff", "abcd"]],
    ),
    "multiple_of": (
        {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 6}}, "required": ["n"]},
        [{"n": 0}, {"n": -12}, {"n": 606}],
    ),
    "all_of_with_refs": (
        {
            "$defs": {
                "named": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            },
            "allOf": [
                {"$ref": "#/$defs/named"},
                {
                    "properties": {"size": {"type": "integer", "minimum": 1, "maximum": 12}},
                    "required": ["size"],
                },
            ],
        },
        [{"name": "a", "size": 1}, {"name": "", "size": 12, "other": [True]}],
    ),
    "enum_with_siblings": (
        {
            "type": "object",
            "properties": {"tag": {"enum": ["a", "bb", "ccc", "dd"], "maxLength": 2, "not": {"const": "a"}}},
            "required": ["tag"],
        },
        [{"tag": "bb"}, {"tag": "dd", "x": 1}],
    ),
    "one_of_closed_objects": (
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}},
                    "required": ["x"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"y": {"type": "string"}},
                    "required": ["y"],
                    "additionalProperties": False,
                },
            ]
        },
        [{"x": 123}, {"y": "sss"}],
    ),
    "dependencies": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
            "dependencies": {"a": ["b"]},
            "dependentRequired": {"c": ["a"]},
        },
        [{}, {"b": "x"}, {"a": 10, "b": "x"}, {"a": 1, "b": "x", "c": True, "z": 0}],
    ),
    "any_of_products": (
        {
            "allOf": [
                {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]},
            ]
        },
        [12345, "ab"],
    ),
    "negations": (
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "not": {"enum": ["no", "x"]}},
                "n": {"type": "integer", "not": {"minimum": 5, "maximum": 10}},
            },
            "not": {"required": ["s", "n"]},
        },
        [{"s": "yes"}, {"n": 30}, {}, {"s": "xx", "q": 1}],
    ),
    "conditions": (
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
            "required": ["kind"],
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["n"]},
            "else": {"properties": {"n": False}},
        },
        [{"kind": "a", "n": 10}, {"kind": "b"}, {"kind": "b", "x": [1]}],
    ),
    "overlapping_one_of": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        },
        [{"a": 10}, {"b": "xyz", "c": 0}],
    ),
    "recursive_any_value": (
        {
            "type": "object",
            "properties": {"child": {"$ref": "#"}, "data": {}},
            "patternProperties": {"^m": {"type": "array", "items": {"$ref": "#"}}},
            "additionalProperties": False,
        },
        [{"data": [[[[{"deep": [1]}]]]]}, {"child": {"m1": [{}, {"data": None}]}}],
    ),
}

# Printable ASCII bytes as tokens, a few multi-byte ones, and EOS.
TOKENS: list[bytes | None] = [bytes([b]) for b in range(32, 127)] + [b'{"', b'":', b", ", b"null", None]
EOS = len(TOKENS) - 1


def vocabulary() -> Vocabulary:
    return Vocabulary(TOKENS, [EOS])


def compile_schema(schema: dict) -> GrammarConstraint:
    # Undeclared properties follow the specification (allowed unless said otherwise), as
    # `jsonschema` reads them.
    return GrammarConstraint.from_json_schema(json.dumps(schema), vocabulary(), additional_properties=True)


def accepts(grammar: GrammarConstraint, text: str) -> bool:
    state = grammar.start()
    ok = state.advance_bytes(text.encode()) and state.is_accepting
    state.check_invariants()
    return ok


def is_valid(document: object, schema: dict) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(document)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_valid_documents_are_accepted_and_mutants_only_when_valid(name: str) -> None:
    schema, documents = SCHEMAS[name]
    grammar = compile_schema(schema)
    rng = random.Random(name)
    num_mutants_accepted = 0
    for document in documents:
        assert is_valid(document, schema), document
        for separators in ((",", ":"), (", ", ": ")):
            text = json.dumps(document, separators=separators)
            assert accepts(grammar, text), text
            for _ in range(80):
                mutant = list(text)
                position = rng.randrange(len(mutant))
                mutant[position] = rng.choice('{}[],:"0123456789abcmnxz_ ')
                candidate = "".join(mutant)
                if accepts(grammar, candidate):
                    num_mutants_accepted += 1
                    assert is_valid(json.loads(candidate), schema), candidate
    assert num_mutants_accepted > 0


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_under_the_mask_validate(name: str) -> None:
    schema, _ = SCHEMAS[name]
    vocab = vocabulary()
    grammar = compile_schema(schema)
    rng = random.Random(name)
    masks = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    finished = 0
    for _ in range(30):
        state = grammar.start()
        text = b""
        for step in range(300):
            fill_grammar_bitmasks([state], masks, [0])
            bits = np.unpackbits(masks[0].view(np.uint8), bitorder="little")[: len(TOKENS)]
            allowed = np.flatnonzero(bits).tolist()
            assert allowed, text
            if EOS in allowed and (step > 40 or len(allowed) == 1 or rng.random() < 0.3):
                assert state.try_advance(EOS) and state.is_finished
                break
            closing = [t for t in allowed if t != EOS and TOKENS[t] in (b"}", b"]", b"null", b"0", b'"')]
            pool = closing if step > 40 and closing else [t for t in allowed if t != EOS]
            token = rng.choice(pool)
            assert state.try_advance(token)
            text += TOKENS[token] or b""
        if state.is_finished:
            finished += 1
            assert is_valid(json.loads(text), schema), text
    assert finished >= 10


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "object", "not": {"minProperties": 2}}, "not"),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
        (
            {"type": "object", "dependencies": {k: [v] for k, v in zip("abcdefg", "bcdefga", strict=True)}},
            "dependencies",
        ),
        ({"type": "number", "minimum": 0.5, "multipleOf": 0.0000001}, "multipleOf"),
        ({"oneOf": [{"type": "array", "minItems": 1}, {"type": "array", "maxItems": 3}]}, "oneOf"),
    ],
)
def test_unsupported_keywords_are_refused_by_name(schema: dict, keyword: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as excinfo:
        compile_schema(schema)
    assert excinfo.value.keyword == keyword
