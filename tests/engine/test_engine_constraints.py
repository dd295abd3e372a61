"""Constrained decoding in the engine on the tiny model: outputs always satisfy their regex or
schema (sampled and greedy, alone and batched, with and without jump-forward), jump-forward
saves forward passes, bad constraints fail only their own request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import jsonschema
import pytest

from sglr.engine.engine import Engine
from sglr.errors import InvalidRequestError

# Bounded patterns, so the random-weight model always reaches the end within max_new_tokens.
REGEXES = [
    r"[0-9]{1,4}",
    r"(yes|no|maybe)",
    r"The answer is (A|B|C|D)\.",
    r"[a-z]{1,8}@[a-z]{1,8}\.(com|org)",
    r"\{\"name\": \"[A-Za-z ]{1,12}\", \"age\": [0-9]{1,2}\}",
]

# Long constant keys: the jump-forward showcase (most of the output is forced).
LONG_KEY_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_identification_number": {"type": "integer", "minimum": 0, "maximum": 999},
        "preferred_communication_channel": {"type": "string", "enum": ["email", "telephone"]},
        "has_accepted_terms_and_conditions": {"type": "boolean"},
        "shipping_address_first_line": {"type": "string", "maxLength": 8},
    },
    "required": [
        "customer_identification_number",
        "preferred_communication_channel",
        "has_accepted_terms_and_conditions",
        "shipping_address_first_line",
    ],
    "additionalProperties": False,
}

NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 10},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
        "owner": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "active": {"type": "boolean"}},
            "required": ["id", "active"],
            "additionalProperties": False,
        },
    },
    "required": ["title", "tags", "owner"],
    "additionalProperties": False,
}

# No single regex holds it (patternProperties, maxProperties): compiled on the grammar path.
PATTERN_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["id"],
    "patternProperties": {"^x[0-9]$": {"type": "boolean"}},
    "additionalProperties": False,
    "maxProperties": 3,
}

PROMPTS = ["Fill in the form:", "def main():\n    return", "The quick brown fox"]


@pytest.fixture(scope="module")
def engine_no_jump(tiny_dir, make_engine) -> Iterator[Engine]:
    eng = make_engine(tiny_dir, disable_jump_forward=True)
    yield eng
    eng.shutdown()


def sampling(temperature: float, seed: int, max_new_tokens: int = 160, **constraint) -> dict:
    return {"temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens, **constraint}


def assert_finished_by_constraint(result: dict) -> None:
    # A constrained request ends when its FSM accepts and the only way on is EOS (or the FSM
    # has no continuation at all), never by running out of tokens in these tests.
    assert result["meta_info"]["finish_reason"]["type"] == "stop", result["meta_info"]


@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no-jump-forward"])
def test_regex_outputs_fully_match(jump: bool, engine: Engine, engine_no_jump: Engine) -> None:
    eng = engine if jump else engine_no_jump
    batch, params = [], []
    for i, pattern in enumerate(REGEXES):
        for seed, temperature in ((i, 0.0), (100 + i, 1.0), (200 + i, 1.5)):
            batch.append(PROMPTS[seed % len(PROMPTS)])
            params.append(sampling(temperature, seed, regex=pattern))
    results = eng.generate(batch, params)
    for result, param in zip(results, params, strict=True):
        assert re.fullmatch(param["regex"], result["text"]), (param, result["text"])
        assert_finished_by_constraint(result)
    eng.check_invariants()


@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no-jump-forward"])
@pytest.mark.parametrize(
    "schema",
    [LONG_KEY_SCHEMA, NESTED_SCHEMA, PATTERN_SCHEMA],
    ids=["long-keys", "nested", "pattern-properties"],
)
def test_json_schema_outputs_validate(
    jump: bool, schema: dict, engine: Engine, engine_no_jump: Engine
) -> None:
    eng = engine if jump else engine_no_jump
    params = [
        sampling(t, seed, json_schema=json.dumps(schema)) for seed, t in enumerate((0.0, 0.8, 1.2, 1.5))
    ]
    results = eng.generate([PROMPTS[0]] * len(params), params)
    for result in results:
        jsonschema.validate(json.loads(result["text"]), schema)
        assert_finished_by_constraint(result)
    eng.check_invariants()


def test_greedy_constrained_output_is_the_same_with_and_without_jump_forward(
    engine: Engine, engine_no_jump: Engine
) -> None:
    # Jump-forward re-tokenizes the forced text the tokenizer's own way, so the token ids may
    # differ from one-at-a-time decoding; the constraint guarantees the text satisfies the
    # schema either way. On forced spans greedy decoding has no choice, so with a schema where
    # every free field is a fixed-width enum the texts must agree exactly.
    schema = {
        "type": "object",
        "properties": {
            "very_long_constant_key_number_one": {"type": "string", "enum": ["alpha", "beta"]},
            "another_rather_long_constant_key": {"type": "boolean"},
        },
        "required": ["very_long_constant_key_number_one", "another_rather_long_constant_key"],
        "additionalProperties": False,
    }
    params = sampling(0.0, 0, json_schema=json.dumps(schema))
    with_jump = engine.generate(PROMPTS[0], params)["text"]
    without = engine_no_jump.generate(PROMPTS[0], params)["text"]
    jsonschema.validate(json.loads(with_jump), schema)
    assert json.loads(with_jump) == json.loads(without)


def test_jump_forward_uses_fewer_forward_passes_on_long_constant_keys(tiny_dir, make_engine) -> None:
    params = [sampling(0.7, seed, json_schema=json.dumps(LONG_KEY_SCHEMA)) for seed in range(4)]
    passes, outputs = {}, {}
    for jump in (True, False):
        eng = make_engine(tiny_dir, disable_jump_forward=not jump)
        try:
            results = [eng.generate(PROMPTS[0], p) for p in params]  # one at a time: passes per request
            stats = eng.get_stats()
            passes[jump] = stats["num_forward_passes"]
            outputs[jump] = [json.loads(r["text"]) for r in results]
            if jump:
                assert stats["num_jump_forward_tokens"] > 0
            else:
                assert stats["num_jump_forward_tokens"] == 0
        finally:
            eng.shutdown()
    for obj in outputs[True] + outputs[False]:
        jsonschema.validate(obj, LONG_KEY_SCHEMA)
    assert passes[False] >= 1.5 * passes[True], passes


def test_streamed_constrained_output_matches_and_concatenates(engine: Engine) -> None:
    params = sampling(1.0, 7, regex=REGEXES[-1])
    chunks = [event["text"] for event in engine.generate(PROMPTS[1], params, stream=True)]
    text = "".join(chunks)
    assert re.fullmatch(REGEXES[-1], text), text
    assert engine.generate(PROMPTS[1], params)["text"] == text


def test_constraint_with_stop_string_and_max_tokens(engine: Engine) -> None:
    # max_new_tokens may cut the constrained output short: finish_reason says "length".
    cut = engine.generate(PROMPTS[0], sampling(0.0, 0, max_new_tokens=3, regex=r"[a-z]{40}"))
    assert cut["meta_info"]["finish_reason"]["type"] == "length"
    assert re.fullmatch(r"[a-z]*", cut["text"])
    # A stop string inside the constrained output ends it early, trimmed.
    stopped = engine.generate(PROMPTS[0], sampling(0.0, 0, regex=r"abc;def", stop=[";"]))
    assert stopped["text"] == "abc"
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": ";"}


def assert_rejected(result: dict, field: str) -> None:
    # A constraint that does not compile aborts its request with the typed error naming the
    # field (the server turns it into an HTTP 400), as SGLang reports aborted requests.
    reason = result["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and isinstance(reason.error, InvalidRequestError), reason
    assert reason.error.param == f"sampling_params.{field}", reason.error.param
    assert field in reason["message"], reason
    assert result["output_ids"] == []


def test_bad_constraints_fail_only_their_request(engine: Engine) -> None:
    assert_rejected(engine.generate(PROMPTS[0], sampling(0.0, 0, regex="(unclosed")), "regex")
    with pytest.raises(InvalidRequestError, match="json_schema"):  # not JSON: rejected up front
        engine.generate(PROMPTS[0], sampling(0.0, 0, json_schema="{not json"))
    unsupported = json.dumps({"type": "object", "not": {}})
    assert_rejected(engine.generate(PROMPTS[0], sampling(0.0, 0, json_schema=unsupported)), "json_schema")
    # The engine carries on.
    ok = engine.generate(PROMPTS[0], sampling(0.0, 0, regex=r"[0-9]{2}"))
    assert re.fullmatch(r"[0-9]{2}", ok["text"])
    engine.check_invariants()


def test_a_batch_with_a_bad_constraint_still_serves_the_others(engine: Engine) -> None:
    params = [
        sampling(0.0, 0, regex=r"[0-9]{3}"),
        sampling(0.0, 0, regex="[z-a]"),
        {"max_new_tokens": 4, "ignore_eos": True},
    ]
    results = engine.generate(PROMPTS, params)
    assert re.fullmatch(r"[0-9]{3}", results[0]["text"])
    assert_rejected(results[1], "regex")
    assert results[2]["meta_info"]["completion_tokens"] == 4
    engine.check_invariants()


def test_compiled_constraints_are_cached(engine: Engine) -> None:
    before = engine.get_stats()["constraint_cache_hits"]
    for _ in range(3):
        engine.generate(PROMPTS[0], sampling(0.0, 0, regex=r"(red|green|blue)"))
    assert engine.get_stats()["constraint_cache_hits"] >= before + 2


def test_a_compile_that_finishes_before_the_loop_sees_the_request_is_not_lost(tiny_dir, make_engine) -> None:
    # A compile-cache hit can finish on the compile thread before the scheduler thread has
    # taken the request in; run compiles inline to make that ordering certain.
    eng = make_engine(tiny_dir)
    try:

        class InlinePool:
            def submit(self, fn, *args):
                fn(*args)

            def shutdown(self, *args, **kwargs):
                pass

        eng._compile_pool = InlinePool()
        results = eng.generate(
            [PROMPTS[0]] * 4, [sampling(0.0, seed, regex=r"[0-9]{2}") for seed in range(4)]
        )
        assert all(re.fullmatch(r"[0-9]{2}", r["text"]) for r in results)
    finally:
        eng.shutdown()


def test_a_finished_constraint_ends_the_request_even_with_ignore_eos(engine: Engine) -> None:
    result = engine.generate(
        PROMPTS[0], sampling(0.0, 0, max_new_tokens=64, regex=r"(yes|no)", ignore_eos=True)
    )
    assert result["text"] in ("yes", "no")
    assert result["meta_info"]["finish_reason"]["type"] == "stop"
    assert result["meta_info"]["completion_tokens"] < 64
