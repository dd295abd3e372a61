"""The OpenAI-compatible routes through the official `openai` client (and raw HTTP for the SSE
framing) against a real uvicorn."""

from __future__ import annotations

import httpx
import openai
import pytest
from server_harness import Served, served_engine

from sse_client import post_stream

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def chat_prompt_ids(served: Served, messages: list[dict]) -> list[int]:
    tokenizer = served.engine.tokenizer
    return tokenizer.encode(tokenizer.apply_chat_template(messages), add_special_tokens=False)


def test_models_list_and_retrieve(served: Served, client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == [served.engine.served_model_name]
    assert client.models.retrieve(served.engine.served_model_name).id == served.engine.served_model_name
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


@pytest.mark.tp2
def test_chat_matches_the_engine_on_the_templated_prompt(served: Served, client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=10, temperature=0)
    ids = chat_prompt_ids(served, MESSAGES)
    direct = served.engine.generate(input_ids=ids, sampling_params={"max_new_tokens": 10, "temperature": 0})
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content == direct["text"]
    assert (
        choice.finish_reason
        == {"length": "length", "stop": "stop"}[direct["meta_info"]["finish_reason"]["type"]]
    )
    assert reply.usage.prompt_tokens == len(ids)
    assert reply.usage.completion_tokens == direct["meta_info"]["completion_tokens"]
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    longer = client.chat.completions.create(
        model="default", messages=MESSAGES, max_completion_tokens=12, max_tokens=3, temperature=0
    )
    assert longer.usage.completion_tokens <= 12 and longer.choices[0].message.content.startswith(
        choice.message.content
    )


@pytest.mark.tp2
def test_chat_stream_reassembles_to_the_non_stream_reply(client: openai.OpenAI) -> None:
    args = {"model": "default", "messages": MESSAGES, "max_tokens": 16, "temperature": 0}
    full = client.chat.completions.create(**args)
    chunks = list(client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_chat_stream_sse_framing(served: Served) -> None:
    body = {"messages": MESSAGES, "max_tokens": 4, "stream": True, "n": 2, "temperature": 0.8, "seed": 1}
    with httpx.Client(base_url=served.url, timeout=60) as http:
        events = post_stream(http, "/v1/chat/completions", body)
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    finished = [c["index"] for e in events for c in e["choices"] if c["finish_reason"]]
    assert sorted(finished) == [0, 1]


@pytest.mark.tp2
def test_chat_n_logprobs_and_top_logprobs(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="default",
        messages=MESSAGES,
        max_tokens=6,
        n=3,
        temperature=1.0,
        seed=5,
        logprobs=True,
        top_logprobs=3,
    )
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert len({c.message.content for c in reply.choices}) > 1
    for choice in reply.choices:
        content = choice.logprobs.content
        assert len(content) == 6
        assert "".join(t.token for t in content) == choice.message.content
        for token in content:
            assert token.logprob <= 0 and len(token.top_logprobs) == 3
            ranked = [t.logprob for t in token.top_logprobs]
            assert ranked == sorted(ranked, reverse=True) and token.logprob <= ranked[0] + 1e-6
    assert reply.usage.completion_tokens == 18
    assert reply.usage.prompt_tokens == reply.usage.total_tokens - 18  # counted once, not per choice


@pytest.mark.tp2
def test_chat_stop_and_seed(client: openai.OpenAI) -> None:
    free = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=12, temperature=0)
    text = free.choices[0].message.content
    stop = text[4:6]
    stopped = client.chat.completions.create(
        model="default", messages=MESSAGES, max_tokens=12, temperature=0, stop=[stop]
    )
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == text[: text.index(stop)]
    args = {"model": "default", "messages": MESSAGES, "max_tokens": 8, "temperature": 1.2, "top_p": 0.9}
    first = client.chat.completions.create(**args, seed=42, presence_penalty=0.5, frequency_penalty=0.5)
    again = client.chat.completions.create(**args, seed=42, presence_penalty=0.5, frequency_penalty=0.5)
    assert first.choices[0].message.content == again.choices[0].message.content


@pytest.mark.tp2
def test_completions_batch_and_n_number_choices_prompt_major(served: Served, client: openai.OpenAI) -> None:
    prompts = ["Once upon a time", "import os\n"]
    reply = client.completions.create(model="default", prompt=prompts, max_tokens=5, n=2, temperature=0)
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    num_generated = 0
    for k, prompt in enumerate(prompts):
        direct = served.engine.generate(prompt, {"max_new_tokens": 5, "temperature": 0})
        assert reply.choices[2 * k].text == reply.choices[2 * k + 1].text == direct["text"]
        num_generated += 2 * direct["meta_info"]["completion_tokens"]
    assert reply.usage.completion_tokens == num_generated
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-")


def test_completions_stream_with_usage(client: openai.OpenAI) -> None:
    args = {"model": "default", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}
    full = client.completions.create(**args)
    chunks = list(client.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == full.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == full.choices[0].finish_reason


@pytest.mark.tp2
def test_completions_echo_with_logprobs_scores_the_prompt(served: Served, client: openai.OpenAI) -> None:
    prompt = "The capital of France is"
    reply = client.completions.create(
        model="default", prompt=prompt, max_tokens=3, temperature=0, echo=True, logprobs=2
    )
    choice = reply.choices[0]
    assert choice.text.startswith(prompt)
    logprobs = choice.logprobs
    num_prompt = len(served.engine.tokenizer.encode(prompt))
    assert len(logprobs.tokens) == num_prompt + 3 == len(logprobs.token_logprobs) == len(logprobs.text_offset)
    assert logprobs.token_logprobs[0] is None and all(v <= 0 for v in logprobs.token_logprobs[1:])
    assert "".join(logprobs.tokens) == choice.text
    assert logprobs.text_offset == [
        sum(len(t) for t in logprobs.tokens[:k]) for k in range(len(logprobs.tokens))
    ]
    assert all(len(top) <= 2 for top in logprobs.top_logprobs[1:])
    scored = client.completions.create(model="default", prompt=prompt, max_tokens=0, echo=True, logprobs=0)
    assert scored.choices[0].text == prompt
    assert scored.choices[0].logprobs.token_logprobs == pytest.approx(
        logprobs.token_logprobs[:num_prompt], abs=1e-4
    )


def test_completions_accept_token_id_prompts(served: Served, client: openai.OpenAI) -> None:
    ids = served.engine.tokenizer.encode("Once upon a time")
    by_ids = client.completions.create(model="default", prompt=ids, max_tokens=5, temperature=0)
    by_text = client.completions.create(
        model="default", prompt="Once upon a time", max_tokens=5, temperature=0
    )
    assert by_ids.choices[0].text == by_text.choices[0].text
    batch = client.completions.create(model="default", prompt=[ids, ids[:2]], max_tokens=2, temperature=0)
    assert len(batch.choices) == 2


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (
            lambda c: c.chat.completions.create(model="default", messages=MESSAGES, temperature=3),
            "temperature",
        ),
        (
            lambda c: c.chat.completions.create(
                model="default", messages=[{"role": "robot", "content": "x"}]
            ),
            "messages[0].role",
        ),
        (lambda c: c.chat.completions.create(model="default", messages=[]), "messages"),
        (lambda c: c.chat.completions.create(model="default", messages=MESSAGES, n=1000), "n"),
        (
            lambda c: c.chat.completions.create(model="default", messages=MESSAGES, top_logprobs=2),
            "top_logprobs",
        ),
        (
            lambda c: c.chat.completions.create(
                model="default", messages=MESSAGES, stream_options={"include_usage": True}
            ),
            "stream_options",
        ),
        (lambda c: c.completions.create(model="default", prompt="", max_tokens=2), "prompt"),
        (lambda c: c.completions.create(model="default", prompt="x", max_tokens=-1), "max_tokens"),
        (lambda c: c.completions.create(model="default", prompt="x", logprobs=99), "logprobs"),
        (lambda c: c.completions.create(model="default", prompt="x", top_p=0), "top_p"),
        (lambda c: c.completions.create(model="default", prompt="x", extra_body={"top_k": 0}), "top_k"),
        (
            lambda c: c.completions.create(model="default", prompt="x", extra_body={"typo_field": 1}),
            "typo_field",
        ),
        (lambda c: c.completions.create(model="default", prompt="x", suffix="y"), "suffix"),
    ],
)
def test_bad_requests_are_400_with_the_field_named(client: openai.OpenAI, call, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as excinfo:
        call(client)
    assert excinfo.value.status_code == 400
    assert excinfo.value.param == param
    assert excinfo.value.type == "invalid_request_error"


def test_tools_on_a_template_without_tool_support(client: openai.OpenAI) -> None:
    """The tiny template cannot show tools: they go in a fallback system prompt (Hermes format)."""
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    reply = client.chat.completions.create(
        model="default", messages=MESSAGES, tools=tools, tool_choice="required", max_tokens=60,
        temperature=0, parallel_tool_calls=False,
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.choices[0].message.tool_calls[0].function.name == "f"
    assert reply.choices[0].message.tool_calls[0].function.arguments == "{}"
    reply = client.chat.completions.create(
        model="default", messages=MESSAGES, tools=tools, tool_choice="none", max_tokens=2
    )
    assert reply.usage.completion_tokens <= 2 and reply.choices[0].message.tool_calls is None


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-9", messages=MESSAGES, max_tokens=2)


def test_chat_template_override_is_used(tiny_dir) -> None:
    template = "{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}\n{% endfor %}<<assistant>>"
    with served_engine(tiny_dir, chat_template=template) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="default", messages=MESSAGES, max_tokens=3, temperature=0
        )
        rendered = "<<system>> Be brief.\n<<user>> Name a colour.\n<<assistant>>"
        expected_ids = served.engine.tokenizer.encode(rendered, add_special_tokens=False)
        assert reply.usage.prompt_tokens == len(expected_ids)
        direct = served.engine.generate(
            input_ids=expected_ids, sampling_params={"max_new_tokens": 3, "temperature": 0}
        )
        assert reply.choices[0].message.content == direct["text"]
