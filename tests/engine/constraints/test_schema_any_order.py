"""Objects whose declared properties may come in any order (`properties_any_order`, the
request's `json_schema_any_order`), checked against `jsonschema`: random instances (keys
shuffled, dropped, repeated, undeclared, values of the wrong type) pass the token mask on both
paths exactly when `jsonschema` validates them and no key repeats; random walks under the mask
validate; the request switch and the engine default reach the compiler."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from sglr._core import GrammarConstraint, TokenFsm, Vocabulary, fill_grammar_bitmasks
from sglr.engine.constraints.compiler import ConstraintCompiler
from sglr.errors import UnsupportedSchemaError
from sglr.sampling_params import SamplingParams

POINT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["x", "y"],
    "additionalProperties": False,
}
SCHEMAS: dict[str, dict] = {
    # Three properties: the FSM path spells out their orders.
    "point": POINT,
    # Six properties, one an object in any order too: the grammar path.
    "nested": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "at": POINT,
            "ok": {"type": "boolean"},
            "note": {"type": "null"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "at", "ok"],
        "additionalProperties": False,
    },
    # Undeclared members (integers) anywhere among four declared ones.
    "open": {
        "type": "object",
        "properties": {k: {"type": "string"} for k in "abcd"},
        "required": ["b", "d"],
        "additionalProperties": {"type": "integer"},
    },
}

# Printable ASCII bytes as tokens, a few multi-byte ones (two whole keys), and EOS.
TOKENS: list[bytes | None] = [bytes([b]) for b in range(32, 127)] + [
    b'{"',
    b'":',
    b", ",
    b'"b":',
    b'"d":',
    None,
]
# What a walk prefers once it is long: closing what is open, the required keys of "open".
CLOSING = {b"}", b"]", b'"', b"0", b", ", b'{"', b'"b":', b'"d":'}
EOS = len(TOKENS) - 1


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, [EOS])


def grammar_of(schema: dict, vocab: Vocabulary) -> GrammarConstraint:
    return GrammarConstraint.from_json_schema(json.dumps(schema), vocab, properties_any_order=True)


def mask_accepts(grammar: GrammarConstraint, text: str, masks: np.ndarray) -> bool:
    """Whether every byte of `text` (one token each) is in the mask before it, and EOS after."""
    state = grammar.start()
    for token in [TOKENS.index(bytes([b])) for b in text.encode()] + [EOS]:
        fill_grammar_bitmasks([state], masks, [0])
        if not (int(masks[0, token >> 5]) >> (token & 31)) & 1:
            state.check_invariants()
            return False
        assert state.try_advance(token)
    state.check_invariants()
    return True


def value_for(schema: dict, rng: random.Random, depth: int = 0) -> object:
    """A value of the schema's type, now and then of another one."""
    if rng.random() < 0.1:
        return rng.choice([1, "s", None, True, [1]])
    kind = schema.get("type")
    if kind == "object":
        return {key: value_for(sub, rng, depth + 1) for key, sub in members(schema, rng)}
    return {
        "integer": lambda: rng.randint(-9, 99),
        "string": lambda: rng.choice(["", "a b", "z"]),
        "boolean": lambda: rng.random() < 0.5,
        "null": lambda: None,
        "array": lambda: ["t"] * rng.randint(0, 2),
    }[kind]()


def members(schema: dict, rng: random.Random) -> list[tuple[str, dict]]:
    """Some declared members (required ones usually), an undeclared one now and then, shuffled."""
    properties = schema["properties"]
    chosen = [
        (k, s) for k, s in properties.items() if rng.random() < (0.9 if k in schema["required"] else 0.5)
    ]
    if rng.random() < 0.2:
        chosen.append(("zz", {"type": "integer"}))
    rng.shuffle(chosen)
    return chosen


def instance_text(schema: dict, rng: random.Random) -> tuple[str, bool]:
    """A random instance's JSON text (a top-level key repeated now and then) and whether it
    holds: `jsonschema` validates it and no key repeats."""
    value = value_for(schema, rng)
    valid = isinstance(value, dict) and jsonschema.Draft202012Validator(schema).is_valid(value)
    if not isinstance(value, dict):
        return json.dumps(value), valid
    pairs = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
    if pairs and rng.random() < 0.2:
        pairs.insert(rng.randint(0, len(pairs)), rng.choice(pairs))
        valid = False
    return "{" + ", ".join(pairs) + "}", valid


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_instances_agree_with_jsonschema(name: str, vocab: Vocabulary) -> None:
    schema = SCHEMAS[name]
    grammar = grammar_of(schema, vocab)
    fsm = None
    if name == "point":
        fsm = TokenFsm.from_json_schema(json.dumps(schema), vocab, properties_any_order=True)
    masks = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    rng = random.Random(name)
    verdicts = set()
    for _ in range(80):
        text, valid = instance_text(schema, rng)
        assert mask_accepts(grammar, text, masks) == valid, text
        if fsm is not None:
            state = fsm.advance_bytes(fsm.start_state, text.encode())
            assert (state is not None and fsm.is_accepting(state)) == valid, text
        verdicts.add(valid)
    assert verdicts == {True, False}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_under_the_mask_validate(name: str, vocab: Vocabulary) -> None:
    schema = SCHEMAS[name]
    grammar = grammar_of(schema, vocab)
    rng = random.Random(name)
    masks = np.zeros((1, vocab.num_mask_words), dtype=np.int32)
    orders = set()
    finished = 0
    for _ in range(25):
        state = grammar.start()
        text = b""
        for step in range(400):
            fill_grammar_bitmasks([state], masks, [0])
            bits = np.unpackbits(masks[0].view(np.uint8), bitorder="little")[: len(TOKENS)]
            allowed = np.flatnonzero(bits).tolist()
            assert allowed, text
            if EOS in allowed:
                assert state.try_advance(EOS) and state.is_finished
                break
            closing = [t for t in allowed if TOKENS[t] in CLOSING]
            token = rng.choice(closing if step > 60 and closing else allowed)
            assert state.try_advance(token)
            text += TOKENS[token] or b""
        if not state.is_finished:
            continue
        finished += 1
        pairs = json.loads(text, object_pairs_hook=lambda pairs: pairs)
        # Declared keys once each (an undeclared one may repeat: a grammar cannot tell them apart).
        declared = [key for key, _ in pairs if key in schema["properties"]]
        assert len(set(declared)) == len(declared), text
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
        orders.add(tuple(declared))
    # Walks write the declared keys in more than the schema's order.
    assert finished >= 10 and len(orders) > 1


def test_past_the_bound_the_grammar_path_refuses_by_name(vocab: Vocabulary) -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(20)}}
    with pytest.raises(UnsupportedSchemaError) as excinfo:
        grammar_of(wide, vocab)
    assert excinfo.value.keyword == "properties"
    # Ordered, the same schema compiles.
    GrammarConstraint.from_json_schema(json.dumps(wide), vocab)


@pytest.mark.parametrize(
    ("engine_default", "request_switch", "any_order"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
def test_the_request_switch_overrides_the_engine_default(
    engine_default: bool, request_switch: bool | None, any_order: bool, vocab: Vocabulary
) -> None:
    compiler = ConstraintCompiler(tokenizer=None, json_schema_any_order=engine_default)  # type: ignore[arg-type]
    compiler._vocabulary = vocab  # the tokenizer is only read for its vocabulary
    params = SamplingParams.from_dict(
        {"json_schema": json.dumps(SCHEMAS["nested"]), "json_schema_any_order": request_switch}
    )

    def accepts(text: str) -> bool:
        state = compiler.compile(params)
        tokens = [TOKENS.index(bytes([b])) for b in text.encode()] + [EOS]
        return all(state.advance(token) for token in tokens) and state.is_complete

    assert accepts('{"id": 3, "at": {"x": 1, "y": 2}, "ok": true}')
    assert accepts('{"ok": true, "at": {"y": 2, "x": 1}, "id": 3}') == any_order


def test_the_request_switch_must_be_a_boolean() -> None:
    with pytest.raises(Exception, match="json_schema_any_order"):
        SamplingParams.from_dict({"json_schema_any_order": "yes"})
