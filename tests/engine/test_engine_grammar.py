"""Grammar-constrained decoding on the tiny model: every output under an EBNF grammar parses
(checked by recognizers written here, independent of the Rust parser), recursive JSON schemas
validate with `jsonschema`, and a bad grammar fails its request naming the line and column."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import jsonschema
import pytest

from sglr.engine.engine import Engine
from sglr.errors import GrammarSyntaxError, InvalidRequestError

# Bounded grammars (rules, alternation, groups, repetition) with an equivalent Python regex.
BOUNDED = [
    ('root ::= "The answer is " choice "."\nchoice ::= "A" | "B" | "C"', r"The answer is (A|B|C)\."),
    (
        'root ::= sum\nsum ::= term ("+" term){0,2}\nterm ::= [0-9]{1,2} | "(" [0-9] "*" [0-9] ")"',
        r"(?:[0-9]{1,2}|\([0-9]\*[0-9]\))(?:\+(?:[0-9]{1,2}|\([0-9]\*[0-9]\))){0,2}",
    ),
    ('# yes or no\nroot ::= answer\nanswer ::= ("yes" | "no") "!"?', r"(yes|no)!?"),
]

# Unbounded recursion: balanced parentheses.
BALANCED = 'root ::= "(" inner ")"\ninner ::= "" | "(" inner ")" inner'

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer", "minimum": 0, "maximum": 9},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}


@pytest.fixture(scope="module")
def engine_no_jump(tiny_dir, make_engine) -> Iterator[Engine]:
    eng = make_engine(tiny_dir, disable_jump_forward=True)
    yield eng
    eng.shutdown()


def sampling(temperature: float, seed: int, max_new_tokens: int = 120, **constraint) -> dict:
    return {"temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens, **constraint}


def balanced_prefix(text: str) -> tuple[bool, bool]:
    """(is a prefix of one balanced group `( ... )`, is that whole group)."""
    depth = 0
    for index, c in enumerate(text):
        if c not in "()":
            return False, False
        depth += 1 if c == "(" else -1
        if depth < 0 or (depth == 0 and index != len(text) - 1):
            return False, False
    return True, depth == 0 and bool(text)


@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no-jump-forward"])
def test_ebnf_outputs_parse(jump: bool, engine: Engine, engine_no_jump: Engine) -> None:
    eng = engine if jump else engine_no_jump
    batch, params = [], []
    for i, (grammar, _) in enumerate(BOUNDED):
        for seed, temperature in ((i, 0.0), (100 + i, 1.0), (200 + i, 1.5)):
            batch.append("Answer:")
            params.append(sampling(temperature, seed, ebnf=grammar))
    results = eng.generate(batch, params)
    for result, param in zip(results, params, strict=True):
        pattern = dict(BOUNDED)[param["ebnf"]]
        assert re.fullmatch(pattern, result["text"]), (param, result["text"])
        assert result["meta_info"]["finish_reason"]["type"] == "stop", result["meta_info"]
    eng.check_invariants()


def test_recursive_ebnf_outputs_are_balanced(engine: Engine) -> None:
    params = [
        sampling(t, seed, max_new_tokens=40, ebnf=BALANCED) for seed, t in enumerate((0.0, 0.7, 1.0, 1.5))
    ]
    results = engine.generate(["Parens:"] * len(params), params)
    for result in results:
        viable, complete = balanced_prefix(result["text"])
        assert viable, result["text"]
        if result["meta_info"]["finish_reason"]["type"] == "stop":
            assert complete, result["text"]
    engine.check_invariants()


def test_recursive_json_schema_outputs_validate(engine: Engine) -> None:
    params = [
        sampling(t, seed, max_new_tokens=200, json_schema=json.dumps(TREE))
        for seed, t in enumerate((0.0, 0.5, 1.0))
    ]
    results = engine.generate(["A tree:"] * len(params), params)
    finished = [r for r in results if r["meta_info"]["finish_reason"]["type"] == "stop"]
    assert finished, [r["text"] for r in results]
    for result in finished:
        jsonschema.validate(json.loads(result["text"]), TREE)
    engine.check_invariants()


def test_a_grammar_syntax_error_fails_its_request_with_line_and_column(engine: Engine) -> None:
    result = engine.generate("x", sampling(0.0, 0, ebnf='root ::= "a"\nitem ::= ("b"'))
    reason = result["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and isinstance(reason.error, InvalidRequestError), reason
    assert reason.error.param == "sampling_params.ebnf"
    assert isinstance(reason.error.__cause__, GrammarSyntaxError)
    assert (reason.error.__cause__.line, reason.error.__cause__.column) == (2, 10)
    assert "line 2, column 10" in reason["message"], reason
    ok = engine.generate("x", sampling(0.0, 0, ebnf='root ::= "ok"'))
    assert ok["text"] == "ok"


def test_only_one_constraint_kind(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError, match="Only one of"):
        engine.generate("x", sampling(0.0, 0, ebnf='root ::= "a"', regex="a"))


LONG_LITERALS = (
    'root ::= "The customer identification number is " [0-9] ", the preferred channel is "'
    ' ("email" | "telephone") ", and the terms were " ("accepted" | "declined") "."'
)
LONG_LITERALS_REGEX = (
    r"The customer identification number is [0-9], the preferred channel is (email|telephone), "
    r"and the terms were (accepted|declined)\."
)


def test_jump_forward_takes_forced_literal_runs_in_fewer_passes(tiny_dir, make_engine) -> None:
    params = [sampling(0.7, seed, ebnf=LONG_LITERALS) for seed in range(3)]
    passes = {}
    for jump in (True, False):
        eng = make_engine(tiny_dir, disable_jump_forward=not jump)
        try:
            results = [eng.generate("Form:", p) for p in params]  # one at a time: passes per request
            stats = eng.get_stats()
            passes[jump] = stats["num_forward_passes"]
            assert (stats["num_jump_forward_tokens"] > 0) == jump
            for result in results:
                assert re.fullmatch(LONG_LITERALS_REGEX, result["text"]), result["text"]
        finally:
            eng.shutdown()
    assert passes[False] >= 1.5 * passes[True], passes
