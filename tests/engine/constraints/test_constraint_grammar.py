"""Recursive JSON schemas through the grammar path, checked against `jsonschema`: random walks
over allowed bytes produce documents that must validate (no false accept), hand-written valid
documents are accepted, and mutated ones are accepted only if `jsonschema` agrees."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from sglr._core import GrammarConstraint, Vocabulary, fill_grammar_bitmasks, json_schema_is_recursive
from sglr.errors import GrammarSyntaxError, UnsupportedSchemaError

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
LIST = {
    "type": "object",
    "properties": {"value": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["value", "next"],
}
EXPR = {
    "anyOf": [
        {"type": "integer", "minimum": 0, "maximum": 99},
        {
            "type": "object",
            "properties": {
                "op": {"enum": ["+", "*"]},
                "args": {"type": "array", "items": {"$ref": "#"}, "minItems": 1},
            },
            "required": ["op", "args"],
        },
    ]
}
VALID = {
    "tree": [{"name": "a"}, {"name": "r", "children": [{"name": "x", "children": []}, {"name": "y"}]}],
    "list": [
        {"value": 1, "next": None},
        {"value": -3, "next": {"value": 4, "next": {"value": 0, "next": None}}},
    ],
    "expr": [7, {"op": "+", "args": [1, {"op": "*", "args": [2, 3]}]}],
}
SCHEMAS = {"tree": TREE, "list": LIST, "expr": EXPR}

# Every printable ASCII byte as a token, plus a few multi-byte ones, plus EOS.
TOKENS: list[bytes | None] = [bytes([b]) for b in range(32, 127)] + [b'{"', b'":', b", ", b"null", None]
EOS = len(TOKENS) - 1


def vocabulary() -> Vocabulary:
    return Vocabulary(TOKENS, [EOS])


def accepts(grammar: GrammarConstraint, text: str) -> bool:
    state = grammar.start()
    ok = state.advance_bytes(text.encode()) and state.is_accepting
    state.check_invariants()
    return ok


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_valid_documents_are_accepted_and_mutants_only_when_valid(name: str) -> None:
    schema = SCHEMAS[name]
    assert json_schema_is_recursive(json.dumps(schema))
    grammar = GrammarConstraint.from_json_schema(json.dumps(schema), vocabulary())
    rng = random.Random(name)
    for document in VALID[name]:
        for separators in ((",", ":"), (", ", ": ")):
            text = json.dumps(document, separators=separators)
            assert accepts(grammar, text), text
            for _ in range(50):
                mutant = list(text)
                position = rng.randrange(len(mutant))
                mutant[position] = rng.choice('{}[],:"0123456789axnul ')
                candidate = "".join(mutant)
                if accepts(grammar, candidate):
                    jsonschema.validate(json.loads(candidate), schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_under_the_mask_validate(name: str) -> None:
    schema = SCHEMAS[name]
    vocab = vocabulary()
    grammar = GrammarConstraint.from_json_schema(json.dumps(schema), vocab)
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
            state.check_invariants()
        if state.is_finished:
            finished += 1
            jsonschema.validate(json.loads(text), schema)
    assert finished >= 10


def test_errors_are_typed() -> None:
    vocab = vocabulary()
    with pytest.raises(UnsupportedSchemaError) as excinfo:
        GrammarConstraint.from_json_schema(json.dumps({"oneOf": [{"$ref": "#"}, {"type": "null"}]}), vocab)
    assert excinfo.value.keyword == "oneOf"
    with pytest.raises(GrammarSyntaxError) as syntax:
        GrammarConstraint.from_ebnf('root ::= "a" |\n  [b-', vocab)
    assert (syntax.value.line, syntax.value.column) == (2, 3)


def test_a_huge_max_length_masks_in_bounded_memory() -> None:
    """A string of up to a million characters: thousands of masks into the value share a few
    memoised ones, the matcher stays under 16 MiB, and the length is still counted exactly."""
    vocab = vocabulary()
    schema = {"type": "string", "minLength": 10, "maxLength": 1_000_000}
    grammar = GrammarConstraint.from_json_schema(json.dumps(schema), vocab)
    state = grammar.start()
    mask = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    quote = TOKENS.index(b'"')
    rng = random.Random(0)
    letters = [TOKENS.index(bytes([b])) for b in b"abcdefxyz "]
    for step in range(3_000):
        fill_grammar_bitmasks([state], mask, [0])
        # The closing quote opens only after the opening one and ten characters.
        assert bool(mask[0, quote >> 5] >> (quote & 31) & 1) == (step == 0 or step > 10)
        assert state.try_advance(quote if step == 0 else rng.choice(letters))
    assert grammar.num_lexeme_masks < 64
    assert grammar.memory_bytes < 16 << 20
    assert not state.is_accepting and state.advance_bytes(b'"') and state.is_accepting
    state.check_invariants()
