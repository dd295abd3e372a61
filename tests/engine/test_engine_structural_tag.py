"""Structural tags on the tiny model: outputs are free text in which every trigger opens a
segment whose JSON validates (`jsonschema`, read back by a scanner written here), the output
ends only outside a segment, and malformed tags fail naming the part."""

from __future__ import annotations

import json

import jsonschema
import pytest

from sglr.engine.engine import Engine
from sglr.errors import InvalidRequestError, InvalidStructuralTagError

DIGIT = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["n"],
}
WORD = {"type": "object", "properties": {"w": {"type": "string", "maxLength": 3}}, "required": ["w"]}
TAG = {
    "type": "structural_tag",
    "structures": [
        {"begin": "<d>", "schema": DIGIT, "end": "</d>"},
        {"begin": "<s>", "schema": WORD, "end": "</s>"},
    ],
    # The trigger is one character, so that a bias on the tokens starting with it opens segments.
    "triggers": ["<"],
}
SCHEMAS = {s["begin"]: (s["schema"], s["end"]) for s in TAG["structures"]}


def segments(text: str) -> tuple[list[tuple[str, object]], bool]:
    """The (begin, JSON value) of each segment; and whether the text ends outside a segment.
    Fails on a trigger no begin continues, JSON the schema refuses, or a missing end."""
    found, position = [], 0
    while (start := text.find("<", position)) != -1:
        rest = text[start:]
        begin = next((b for b in SCHEMAS if rest.startswith(b)), None)
        if begin is None:
            assert any(b.startswith(rest) for b in SCHEMAS), f"trigger not continued into a begin: {rest!r}"
            return found, False
        schema, end = SCHEMAS[begin]
        try:
            value, stop = json.JSONDecoder().raw_decode(text, start + len(begin))
        except json.JSONDecodeError:
            return found, False  # the JSON is cut off (the caller checks the output was cut)
        jsonschema.validate(value, schema)
        tail = text[stop:]
        if not tail.startswith(end):
            assert end.startswith(tail), f"no end after the segment's JSON: {tail!r}"
            return found, False
        found.append((begin, value))
        position = stop + len(end)
    return found, True


def test_segments_validate_and_the_output_ends_outside_them(engine: Engine) -> None:
    hf = engine.tokenizer.hf
    special = set(hf.all_special_ids)  # `<|endoftext|>` too: a bias on EOS would end every output
    opening = {str(i): 8.0 for i in range(len(hf)) if hf.decode([i]).startswith("<") and i not in special}
    assert opening, "the tiny vocabulary has tokens starting with the trigger"
    params = [
        {
            "temperature": 1.0,
            "seed": seed,
            "max_new_tokens": 48,
            "structural_tag": json.dumps(TAG),
            "logit_bias": opening,
        }
        for seed in range(8)
    ]
    results = engine.generate(["Call:"] * len(params), params)
    num_segments = 0
    for result in results:
        found, closed = segments(result["text"])
        num_segments += len(found)
        finish = result["meta_info"]["finish_reason"]["type"]
        # EOS is only allowed outside a segment; a cut (length) may fall anywhere.
        assert closed or finish == "length", (result["text"], finish)
    assert num_segments > 0, [r["text"] for r in results]


def test_free_text_alone_never_holds_the_trigger(engine: Engine) -> None:
    tag = json.dumps(TAG)
    results = engine.generate(
        ["Hello"] * 4,
        [{"temperature": 1.5, "seed": s, "max_new_tokens": 24, "structural_tag": tag} for s in range(4)],
    )
    for result in results:
        _, closed = segments(result["text"])  # asserts on any malformed segment
        assert closed or result["meta_info"]["finish_reason"]["type"] == "length", result


@pytest.mark.parametrize(
    ("tag", "param"),
    [
        ({**TAG, "triggers": ["<", "["]}, "sampling_params.structural_tag.triggers[1]"),
        ({**TAG, "structures": [*TAG["structures"], {"begin": "d>", "schema": DIGIT, "end": ""}]}, "sampling_params.structural_tag.structures[2].begin"),
        ({**TAG, "structures": [{"begin": "<d>", "schema": {"type": "nope"}, "end": ""}]}, "sampling_params.structural_tag.structures[0].schema"),
    ],
)  # fmt: skip
def test_a_tag_the_grammar_refuses_fails_its_request_naming_the_part(
    engine: Engine, tag: dict, param: str
) -> None:
    result = engine.generate("x", {"max_new_tokens": 4, "structural_tag": json.dumps(tag)})
    reason = result["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and isinstance(reason.error, InvalidRequestError), reason
    assert reason.error.param == param
    assert isinstance(reason.error.__cause__, InvalidStructuralTagError)


@pytest.mark.parametrize(
    ("tag", "param"),
    [
        ({"structures": [{"begin": "<d>", "end": "</d>"}], "triggers": ["<"]}, "sampling_params.structural_tag.structures[0].schema"),
        ({"structures": [{"schema": DIGIT, "end": "</d>"}], "triggers": ["<"]}, "sampling_params.structural_tag.structures[0].begin"),
        ({"structures": [{"begin": "<d>", "schema": DIGIT}], "triggers": ["<"]}, "sampling_params.structural_tag.structures[0].end"),
        ({"structures": []}, "sampling_params.structural_tag.triggers"),
        ({"type": "structural_tag", "format": {"type": "triggered_tags"}}, "sampling_params.structural_tag.format"),
        ([1], "sampling_params.structural_tag"),
    ],
)  # fmt: skip
def test_a_malformed_tag_is_refused_at_the_door(engine: Engine, tag: object, param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        engine.generate("x", {"max_new_tokens": 4, "structural_tag": json.dumps(tag)})
    assert caught.value.param == param


def test_only_one_constraint_kind(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError, match="Only one of"):
        engine.generate("x", {"structural_tag": json.dumps(TAG), "regex": "a"})
