"""The reasoning splitter alone: whole replies, and the same replies fed in two deltas cut at
every position (tags cut anywhere), which must join to the same parts."""

from __future__ import annotations

import pytest

from sglr.errors import EngineConfigError
from sglr.server.reasoning.chat import ChatReasoning, ReasoningDeltas
from sglr.server.reasoning.formats import REASONING_FORMATS, reasoning_format
from sglr.server.reasoning.split import ReasoningSplitter, split_reasoning

R1 = REASONING_FORMATS["deepseek-r1"]
QWEN3 = REASONING_FORMATS["qwen3"]

# (format, reply, reasoning or None, content)
CASES = [
    (R1, "let me see</think>Paris.", "let me see", "Paris."),
    (R1, "<think>\nlet me see\n</think>\n\nParis.", "let me see\n", "Paris."),
    (R1, "still thinking <", "still thinking <", ""),  # unclosed: all reasoning
    (R1, "</think>Paris.", "", "Paris."),  # empty reasoning
    (R1, "<think></think>Paris.", "", "Paris."),
    (R1, "", None, ""),
    (R1, "a</think>b</think>c", "a", "b</think>c"),  # only the first close tag ends it
    (QWEN3, "<think>hmm</think>Paris.", "hmm", "Paris."),
    (QWEN3, "  <think>\nhmm</think>\n\nParis.", "hmm", "Paris."),
    (QWEN3, "Paris, no tags.", None, "Paris, no tags."),  # no tag: all content
    (QWEN3, "<thinking is not a tag", None, "<thinking is not a tag"),
    (QWEN3, "<think>unclosed </thi", "unclosed </thi", ""),
    (QWEN3, "<think></think>", "", ""),
    (QWEN3, "<thi", None, "<thi"),
    (QWEN3, "a </think> b", None, "a </think> b"),  # a close tag without an open one is text
]


@pytest.mark.parametrize(("fmt", "reply", "reasoning", "content"), CASES)
def test_a_whole_reply_splits(fmt, reply: str, reasoning: str | None, content: str) -> None:
    assert split_reasoning(fmt, reply) == (reasoning, content)


def _fed(fmt, pieces: list[str]) -> tuple[list[str], list[str]]:
    splitter = ReasoningSplitter(fmt)
    reasoning, content = [], []
    for piece in pieces:
        r, c = splitter.feed(piece)
        reasoning.append(r)
        content.append(c)
    r, c = splitter.finish()
    return [*reasoning, r], [*content, c]


@pytest.mark.parametrize(("fmt", "reply", "reasoning", "content"), CASES)
def test_every_two_delta_cut_gives_the_whole_split(fmt, reply, reasoning, content) -> None:
    for cut in range(len(reply) + 1):
        reasonings, contents = _fed(fmt, [reply[:cut], reply[cut:]])
        assert ("".join(reasonings), "".join(contents)) == (reasoning or "", content), cut
        # Equal joins at every cut mean no piece of a tag went out early: it would show in a part.


def test_one_character_deltas_hold_back_a_possible_close_tag() -> None:
    reasonings, contents = _fed(R1, list("ab</think>cd"))
    assert reasonings[:3] == ["a", "b", ""] and "".join(reasonings) == "ab"
    assert "".join(contents) == "cd" and all(c == "" for c in contents[:10])


def test_reasoning_comes_before_content_in_one_delta() -> None:
    assert ReasoningSplitter(QWEN3).feed("<think>x</think>y") == ("x", "y")


def _request(fmt, body: dict, kwargs: dict | None = None) -> ChatReasoning:
    return ChatReasoning(fmt, body, kwargs or {})


def test_request_switches() -> None:
    assert _request(R1, {}).split("a</think>b") == ("a", "b")
    assert _request(R1, {"separate_reasoning": False}).split("a</think>b") == (None, "a</think>b")
    assert _request(None, {}).split("a</think>b") == (None, "a</think>b")
    off = _request(QWEN3, {}, {"enable_thinking": False})
    assert off.split("<think>a</think>b") == (None, "<think>a</think>b")
    assert _request(QWEN3, {}, {"enable_thinking": True}).split("<think>a</think>b") == ("a", "b")
    assert _request(R1, {}, {"enable_thinking": False}).split("a</think>b") == ("a", "b")
    assert _request(R1, {}).split("</think>b") == (None, "b")  # empty reasoning is null


def test_stream_reasoning_false_sends_the_reasoning_once_it_ends() -> None:
    deltas = ReasoningDeltas(_request(R1, {"stream_reasoning": False}))
    assert deltas.feed("one ") == ("", "")
    assert deltas.feed("two</thi") == ("", "")
    assert deltas.feed("nk>Yes") == ("one two", "Yes")
    assert deltas.finish() == ("", "")
    unclosed = ReasoningDeltas(_request(R1, {"stream_reasoning": False}))
    assert unclosed.feed("one two") == ("", "")
    assert unclosed.finish() == ("one two", "")


def test_unknown_parser_names_the_choices() -> None:
    assert reasoning_format(None) is None
    with pytest.raises(EngineConfigError, match="deepseek-r1, qwen3"):
        reasoning_format("gpt-oss-x")


def test_a_constraint_waits_for_the_end_of_the_reasoning() -> None:
    r1, qwen3 = REASONING_FORMATS["deepseek-r1"], REASONING_FORMATS["qwen3"]

    def gated(fmt, body: dict, kwargs: dict | None = None, params: dict | None = None) -> dict:
        params = {"json_schema": "{}"} if params is None else params
        _request(fmt, body, kwargs).gate_constraint(params)
        return {k: v for k, v in params.items() if k.startswith("reasoning_")}

    assert gated(r1, {}) == {"reasoning_close_tag": "</think>"}  # the reply starts inside
    assert gated(qwen3, {}) == {"reasoning_open_tag": "<think>", "reasoning_close_tag": "</think>"}
    # Reasoning kept in content is still reasoning: the constraint waits for it all the same.
    assert gated(r1, {"separate_reasoning": False}) == {"reasoning_close_tag": "</think>"}
    assert gated(qwen3, {}, {"enable_thinking": False}) == {}  # no thinking: constrained at once
    assert gated(None, {}) == {}
    assert gated(r1, {}, params={"regex": ""}) == {} == gated(r1, {}, params={})
    assert gated(r1, {}, params={"ebnf": "root ::= x"}) == {"reasoning_close_tag": "</think>"}
