"""The limits of `sglr.limits`: docs/server.md lists exactly its table with the flags, the flags
exist with those defaults, and each per-field limit refuses a request one past it (a 400 naming
the field, before the work) while one at it goes through."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_harness import Served, served_engine

from sglr import limits
from sglr.errors import EngineConfigError, SamplingLimitError
from sglr.sampling_params import SamplingParams
from sglr.server import ServerSettings
from sglr.server.launch import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"
LIMITS_HEADER = "| limit | default | flag | what |"
SMALL = ServerSettings(max_messages=3, max_tools=2, max_tool_schema_bytes=300, max_sequences_per_request=4)


def doc_row(limit: limits.Limit) -> str:
    return f"| `{limit.name}` | {limits.describe(limit)} | {f'`{limit.flag}`' if limit.flag else 'fixed'} | {limit.what} |"


def test_docs_list_every_limit_with_its_flag() -> None:
    text = DOCS.read_text()
    table = text[text.index(LIMITS_HEADER) :].split("\n\n")[0].splitlines()[2:]
    assert table == [doc_row(limit) for limit in limits.TABLE]


def test_every_flagged_limit_is_a_server_flag_with_its_default() -> None:
    defaults = {
        action.option_strings[0]: action.default
        for action in build_parser()._actions
        if action.option_strings
    }
    for limit in limits.TABLE:
        if limit.flag is not None and limit.flag.startswith("--max-"):
            assert defaults[limit.flag] == limit.default, limit.name
    args = build_parser().parse_args(["--max-messages", "7", "--max-image-bytes", "2048"])
    assert (args.max_messages, args.max_image_bytes) == (7, 2048)


@pytest.mark.parametrize(
    "name", ["max_sequences_per_request", "max_messages", "max_tools", "max_tool_schema_bytes"]
)
def test_server_limits_must_be_positive(name: str) -> None:
    assert getattr(ServerSettings(**{name: 1}), name) == 1
    with pytest.raises(EngineConfigError, match=name):
        ServerSettings(**{name: 0})


def test_sampling_limits_are_typed_and_name_the_field() -> None:
    cases = [
        ({"stop": ["x" * limits.MAX_STOP_STRING_CHARS]}, None),
        ({"stop": ["x" * (limits.MAX_STOP_STRING_CHARS + 1)]}, ("stop", "max_stop_string_chars")),
        ({"stop": [f"s{i}" for i in range(limits.MAX_STOP_STRINGS + 1)]}, ("stop", "max_stop_strings")),
        ({"logit_bias": {str(i): 1.0 for i in range(limits.MAX_LOGIT_BIAS_ENTRIES)}}, None),
        ({"logit_bias": {str(i): 1.0 for i in range(limits.MAX_LOGIT_BIAS_ENTRIES + 1)}},
         ("logit_bias", "max_logit_bias_entries")),
        ({"stop_regex": "a" * (limits.MAX_STOP_REGEX_BYTES + 1)}, ("stop_regex", "max_stop_regex_bytes")),
    ]  # fmt: skip
    for raw, refused in cases:
        if refused is None:
            SamplingParams.from_dict(raw)
            continue
        with pytest.raises(SamplingLimitError) as caught:
            SamplingParams.from_dict(raw)
        assert (caught.value.param, caught.value.limit) == (f"sampling_params.{refused[0]}", refused[1])


@pytest.fixture(scope="module")
def small(tiny_dir: Path) -> Iterator[Served]:
    with served_engine(tiny_dir, SMALL) as served:
        yield served


def chat(messages: int = 1, tools: list | None = None) -> dict:
    body = {"model": "default", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}] * messages}
    return body if tools is None else {**body, "tools": tools}


def tool(name: str, schema_bytes: int = 0) -> dict:
    properties = {"a": {"type": "string", "description": "d" * schema_bytes}} if schema_bytes else {}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


def schema_len(t: dict) -> int:
    return len(json.dumps(t["function"]["parameters"]).encode())


def refused(response: httpx.Response, param: str, words: str) -> bool:
    error = response.json()["error"]
    return response.status_code == 400 and error["param"] == param and words in error["message"]


def test_chat_messages_and_tools_are_bounded(small: Served) -> None:
    with httpx.Client(base_url=small.url + "/v1", timeout=60) as client:
        assert client.post("/chat/completions", json=chat(3)).status_code == 200
        assert refused(client.post("/chat/completions", json=chat(4)), "messages", "limit of 3")
        assert client.post("/chat/completions", json=chat(1, [tool("a"), tool("b")])).status_code == 200
        many = chat(1, [tool("a"), tool("b"), tool("c")])
        assert refused(client.post("/chat/completions", json=many), "tools", "limit of 2")
        big = tool("a", 300)
        assert schema_len(big) > 300
        fits = tool("a", 300 - (schema_len(big) - 300))
        assert schema_len(fits) == 300
        assert client.post("/chat/completions", json=chat(1, [fits])).status_code == 200
        response = client.post("/chat/completions", json=chat(1, [tool("b"), big]))
        assert refused(response, "tools[1].function.parameters", "over the server's limit of 300")


def test_fan_out_and_logprobs_are_bounded(small: Served) -> None:
    with httpx.Client(base_url=small.url, timeout=60) as client:
        ok = {"text": ["a", "b"], "sampling_params": {"n": 2, "max_new_tokens": 1}}
        assert client.post("/generate", json=ok).status_code == 200
        over = {"text": ["a", "b"], "sampling_params": {"n": 3, "max_new_tokens": 1}}
        assert refused(client.post("/generate", json=over), "sampling_params.n", "limit of 4")
        at = {"text": "a", "return_logprob": True, "top_logprobs_num": limits.MAX_LOGPROBS,
              "sampling_params": {"max_new_tokens": 1}}  # fmt: skip
        answer = client.post("/generate", json=at)
        assert answer.status_code == 200
        assert len(answer.json()["meta_info"]["output_top_logprobs"][0]) == limits.MAX_LOGPROBS
        past = {**at, "top_logprobs_num": limits.MAX_LOGPROBS + 1}
        assert refused(
            client.post("/generate", json=past), "top_logprobs_num", f"at most {limits.MAX_LOGPROBS}"
        )


def test_a_prompt_too_long_for_any_tokenization_is_refused_untokenized(small: Served) -> None:
    engine = small.engine
    max_chars = engine.context_len * engine.tokenizer.longest_token_chars * limits.PROMPT_CHARS_MARGIN
    with httpx.Client(base_url=small.url, timeout=120) as client:
        too_long = {"text": "ab " * (max_chars // 3 + 1), "sampling_params": {"max_new_tokens": 1}}
        assert refused(client.post("/generate", json=too_long), "text", f"{max_chars} characters at most")
        # At the limit it is tokenized, and refused for its token count instead.
        at = {"text": ("ab " * (max_chars // 3 + 1))[:max_chars], "sampling_params": {"max_new_tokens": 1}}
        assert refused(client.post("/generate", json=at), "text", "context length")
        content = "ab " * (max_chars // 3 + 1)
        body = {"model": "default", "max_tokens": 1, "messages": [{"role": "user", "content": content}]}
        assert refused(client.post("/v1/chat/completions", json=body), "messages", "characters at most")
    small.assert_no_leaks()
