"""`--reasoning-parser` served: the tiny model's reply is forced with a `regex` so that it holds
reasoning (the tags are plain characters to the constraint), then `reasoning_content` and
`content` are checked whole and streamed, with `separate_reasoning` / `stream_reasoning` and
`chat_template_kwargs` (which also reaches the template: this server's template prints one)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_harness import Served, served_engine

from sglr.errors import EngineConfigError
from sglr.server import ServerSettings
from sse_client import post_stream

# Prints `flag` when the request's chat_template_kwargs sets it.
TEMPLATE = (
    "{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}\n{% endfor %}"
    "{% if flag is defined %}[flag={{ flag }}]{% endif %}<<assistant>>"
)
QWEN3_REPLY = r"<think>[a-z]{3,12}</think>[A-Z][a-z]{2,8}"
R1_REPLY = r"[a-z]{3,12}</think>[A-Z][a-z]{2,8}"
MESSAGES = [{"role": "user", "content": "Name a city."}]


@pytest.fixture(scope="module")
def qwen3(tiny_dir: Path) -> Iterator[Served]:
    with served_engine(tiny_dir, ServerSettings(reasoning_parser="qwen3"), chat_template=TEMPLATE) as s:
        yield s


def _chat(served: Served, **fields) -> dict:
    body = {"messages": MESSAGES, "max_tokens": 40, "temperature": 0, **fields}
    response = httpx.post(served.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def _streamed(served: Served, **fields) -> tuple[str, str, list[dict]]:
    body = {"messages": MESSAGES, "max_tokens": 40, "temperature": 0, "stream": True, **fields}
    with httpx.Client(base_url=served.url, timeout=60) as http:
        events = post_stream(http, "/v1/chat/completions", body)
    deltas = [c["delta"] for e in events for c in e["choices"]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    return reasoning, "".join(d.get("content") or "" for d in deltas), deltas


def _parts(text: str) -> tuple[str, str]:
    match = re.fullmatch(r"(?:<think>)?([a-z]+)</think>(\w+)", text)
    assert match, text
    return match.group(1), match.group(2)


def test_reasoning_goes_in_reasoning_content(qwen3: Served) -> None:
    whole = _chat(qwen3, separate_reasoning=False, regex=QWEN3_REPLY)["choices"][0]["message"]
    reasoning, content = _parts(whole["content"])
    assert whole["reasoning_content"] is None
    message = _chat(qwen3, regex=QWEN3_REPLY)["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == (reasoning, content)
    assert message["tool_calls"] is None


def test_streamed_deltas_join_to_the_whole_split(qwen3: Served) -> None:
    message = _chat(qwen3, regex=QWEN3_REPLY)["choices"][0]["message"]
    reasoning, content, deltas = _streamed(qwen3, regex=QWEN3_REPLY)
    assert (reasoning, content) == (message["reasoning_content"], message["content"])
    assert not any("<" in (d.get("reasoning_content") or "") + (d.get("content") or "") for d in deltas)
    held_reasoning, held_content, held = _streamed(qwen3, regex=QWEN3_REPLY, stream_reasoning=False)
    assert (held_reasoning, held_content) == (reasoning, content)
    assert len([d for d in held if d.get("reasoning_content")]) == 1
    whole_text = _streamed(qwen3, regex=QWEN3_REPLY, separate_reasoning=False)
    assert whole_text[0] == "" and _parts(whole_text[1]) == (reasoning, content)


def test_a_reply_without_the_tag_is_content(qwen3: Served) -> None:
    message = _chat(qwen3, regex=r"[A-Z][a-z]{2,8}")["choices"][0]["message"]
    assert message["reasoning_content"] is None and re.fullmatch(r"[A-Z][a-z]+", message["content"])


def test_enable_thinking_false_keeps_everything_in_content(qwen3: Served) -> None:
    kwargs = {"enable_thinking": False}
    message = _chat(qwen3, regex=QWEN3_REPLY, chat_template_kwargs=kwargs)["choices"][0]["message"]
    assert message["reasoning_content"] is None and message["content"].startswith("<think>")


def test_chat_template_kwargs_reach_the_template(qwen3: Served) -> None:
    def prompt_tokens(rendered: str) -> int:
        return len(qwen3.engine.tokenizer.encode(rendered, add_special_tokens=False))

    plain = _chat(qwen3, max_tokens=1)["usage"]["prompt_tokens"]
    flagged = _chat(qwen3, max_tokens=1, chat_template_kwargs={"flag": "xyzzy plugh"})
    assert plain == prompt_tokens("<<user>> Name a city.\n<<assistant>>")
    assert flagged["usage"]["prompt_tokens"] == prompt_tokens(
        "<<user>> Name a city.\n[flag=xyzzy plugh]<<assistant>>"
    )


def test_deepseek_r1_starts_inside_the_reasoning(tiny_dir: Path) -> None:
    settings = ServerSettings(reasoning_parser="deepseek-r1")
    with served_engine(tiny_dir, settings, chat_template=TEMPLATE) as r1:
        whole = _chat(r1, regex=R1_REPLY, separate_reasoning=False)["choices"][0]["message"]["content"]
        message = _chat(r1, regex=R1_REPLY)["choices"][0]["message"]
        assert (message["reasoning_content"], message["content"]) == _parts(whole)
        assert _streamed(r1, regex=R1_REPLY)[:2] == _parts(whole)


def test_an_unknown_parser_is_refused_with_the_choices() -> None:
    with pytest.raises(
        EngineConfigError, match=r"unknown reasoning parser 'nope' \(choices: deepseek-r1, qwen3\)"
    ):
        ServerSettings(reasoning_parser="nope")


TOOL = {"type": "function", "function": {"name": "city", "parameters": {"type": "object"}}}
CALL = r'<tool_call>\{"name": "city", "arguments": \{\}\}</tool_call>'


def test_tool_calls_are_parsed_in_the_content_only(qwen3: Served) -> None:
    after = _chat(qwen3, tools=[TOOL], regex=rf"<think>[a-z]{{3,8}}</think>{CALL}")["choices"][0]
    assert after["finish_reason"] == "tool_calls" and re.fullmatch(
        "[a-z]+", after["message"]["reasoning_content"]
    )
    assert [c["function"]["name"] for c in after["message"]["tool_calls"]] == ["city"]
    inside = _chat(qwen3, tools=[TOOL], regex=rf"<think>{CALL}</think>[A-Z][a-z]{{2,8}}")["choices"][0]
    assert inside["message"]["tool_calls"] is None and inside["finish_reason"] != "tool_calls"
    assert inside["message"]["reasoning_content"].startswith("<tool_call>")
    reasoning, _, deltas = _streamed(qwen3, tools=[TOOL], regex=rf"<think>{CALL}</think>[A-Z][a-z]{{2,8}}")
    assert reasoning == inside["message"]["reasoning_content"] and not any("tool_calls" in d for d in deltas)


def test_usage_counts_the_tokens_up_to_the_close_tag(qwen3: Served) -> None:
    greedy = {"regex": QWEN3_REPLY, "temperature": 0, "max_new_tokens": 40}
    output_ids = qwen3.engine.generate("<<user>> Name a city.\n<<assistant>>", greedy)["output_ids"]

    def decoded(num_tokens: int) -> str:
        return qwen3.engine.tokenizer.decode(output_ids[:num_tokens], skip_special_tokens=False)

    expected = next(n for n in range(1, len(output_ids) + 1) if "</think>" in decoded(n))
    assert 0 < expected < len(output_ids)  # the answer comes after the reasoning
    usage = _chat(qwen3, regex=QWEN3_REPLY)["usage"]
    assert usage["completion_tokens"] == len(output_ids)
    assert usage["reasoning_tokens"] == expected
    assert usage["completion_tokens_details"] == {"reasoning_tokens": expected}
    body = {"messages": MESSAGES, "max_tokens": 40, "temperature": 0, "stream": True, "regex": QWEN3_REPLY}
    with httpx.Client(base_url=qwen3.url, timeout=60) as http:
        events = post_stream(
            http, "/v1/chat/completions", {**body, "stream_options": {"include_usage": True}}
        )
    assert events[-1]["choices"] == [] and events[-1]["usage"] == usage
    assert _chat(qwen3, regex=r"[A-Z][a-z]{2,8}")["usage"]["reasoning_tokens"] == 0
    assert "reasoning_tokens" not in _chat(qwen3, regex=QWEN3_REPLY, separate_reasoning=False)["usage"]
