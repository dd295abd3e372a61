"""Documents produced under a JSON-schema constraint validate against the schema (checked with
the `jsonschema` package), with jump-forward strings appended the way the engine will."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from sglr._core import TokenFsm, Vocabulary
from sglr.engine.constraints import ConstraintCache, JsonSchemaConfig, vocabulary_from_hf

SCHEMAS = {
    # Fractional bounds on numbers are exact: every random document validates.
    "fractional_bounds": {
        "type": "object",
        "properties": {
            "ratio": {"type": "number", "minimum": 0.25, "exclusiveMaximum": 2.5},
            "t": {"type": "number", "exclusiveMinimum": -1.5, "maximum": -0.05},
            "p": {"type": "number", "minimum": 0.1, "maximum": 0.105},
        },
        "required": ["ratio", "t", "p"],
    },
    "flat": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "active": {"type": "boolean"},
            "role": {"enum": ["admin", "user", "guest"]},
        },
        "required": ["name", "age", "role"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "owner": {
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "since": {"type": "string", "format": "date"},
                },
                "required": ["email"],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,6}$"}, "maxItems": 3},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["id", "owner"],
    },
    "unions": {
        "type": "object",
        "properties": {
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
                        "required": ["kind", "r"],
                    },
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "square"}, "side": {"type": "integer"}},
                        "required": ["kind", "side"],
                    },
                ]
            },
            "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            "point": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "items": False,
                "minItems": 2,
            },
        },
        "required": ["shape", "note", "point"],
    },
    "refs": {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "const": "A-1"},
                    "qty": {"type": "integer", "minimum": 1},
                },
                "required": ["sku", "qty"],
            }
        },
        "type": "array",
        "items": {"$ref": "#/$defs/item"},
        "minItems": 1,
        "maxItems": 2,
    },
}


class ByteGraph:
    """Every state reachable from the start by single bytes, with its distance to acceptance,
    so a walk can be finished along a shortest completion."""

    def __init__(self, fsm: TokenFsm) -> None:
        self.edges: dict[int, list[tuple[bytes, int]]] = {}
        order = [fsm.start_state]
        for state in order:
            self.edges[state] = []
            for byte in range(256):
                nxt = fsm.advance_bytes(state, bytes([byte]))
                if nxt is not None:
                    self.edges[state].append((bytes([byte]), nxt))
                    if nxt not in self.edges and nxt not in order:
                        order.append(nxt)
        self.distance = {s: 0 for s in order if fsm.is_accepting(s)}
        frontier = list(self.distance)
        while frontier:
            reached = [
                s for s in order if s not in self.distance and any(n in frontier for _, n in self.edges[s])
            ]
            for s in reached:
                self.distance[s] = self.distance[frontier[0]] + 1
            frontier = reached

    def finish(self, state: int, rng: random.Random) -> bytes:
        out = b""
        while self.distance[state] > 0:
            closer = [
                (b, n) for b, n in self.edges[state] if self.distance.get(n, -1) == self.distance[state] - 1
            ]
            byte, state = rng.choice(closer)
            out += byte
        return out


def random_document(fsm: TokenFsm, vocab: Vocabulary, graph: ByteGraph, rng: random.Random) -> bytes:
    """Random tokens (forced strings appended whole, as jump-forward does), then the shortest
    way to an accepting state."""
    eos = vocab.eos_token_ids[0]
    state, out = fsm.start_state, b""
    for _ in range(rng.randrange(40)):
        forced, after = fsm.jump_forward(state)
        out, state = out + forced, after
        ids = fsm.allowed_token_ids(state).tolist()
        assert ids, f"dead end after {out!r}"
        token = rng.choice(ids)
        if token == eos:
            return out
        out += vocab.token_bytes(token)
        state = fsm.advance(state, token)
    tail = graph.finish(state, rng)
    state = fsm.advance_bytes(state, tail)
    assert state is not None and eos in fsm.allowed_token_ids(state).tolist()
    return out + tail


@pytest.fixture(scope="module")
def vocab(hf_byte_level) -> Vocabulary:
    return vocabulary_from_hf(hf_byte_level)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("whitespace", ["[ ]?", ""])
def test_random_documents_validate(name: str, whitespace: str, vocab: Vocabulary) -> None:
    schema = SCHEMAS[name]
    fsm = ConstraintCache().json_schema(schema, vocab, JsonSchemaConfig(whitespace_pattern=whitespace))
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    rng = random.Random(f"{name}-{whitespace}")
    graph = ByteGraph(fsm)
    for _ in range(30):
        text = random_document(fsm, vocab, graph, rng)
        document = json.loads(text.decode("utf-8"))
        errors = sorted(validator.iter_errors(document), key=str)
        assert not errors, f"{text!r}: {errors[0].message}"


def test_valid_documents_are_accepted_token_by_token(hf_byte_level, vocab: Vocabulary) -> None:
    documents = {
        "flat": {"name": "Ada", "age": 36, "score": 0.5, "active": True, "role": "admin"},
        "nested": {
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "owner": {"email": "a@b.org", "since": "2024-02-29"},
            "tags": ["x"],
            "meta": {"k": 1},
        },
        "unions": {"shape": {"kind": "circle", "r": 1.5}, "note": None, "point": [1, -2]},
        "refs": [{"sku": "A-1", "qty": 3}],
    }
    for name, document in documents.items():
        jsonschema.validate(document, SCHEMAS[name])
        fsm = ConstraintCache().json_schema(SCHEMAS[name], vocab)
        ids = hf_byte_level.encode(json.dumps(document), add_special_tokens=False)
        assert fsm.is_accepting(fsm.advance_many(fsm.start_state, ids)), name
        bad = dict(document) if isinstance(document, dict) else {"not": "an array"}
        bad_ids = hf_byte_level.encode(json.dumps(bad) + " x", add_special_tokens=False)
        state = fsm.start_state
        for token in bad_ids:
            state = fsm.try_advance(state, token)
            if state is None:
                break
        assert state is None or not fsm.is_accepting(state), name
