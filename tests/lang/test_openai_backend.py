"""The OpenAI backend against a fake OpenAI-compatible server: requests, API speculative
execution (fewer calls, same variables), and select through logprobs or logit bias."""

from __future__ import annotations

import pytest
from lang_fake_lm import CharTokenizer, char_logprob
from lang_fake_openai_server import FakeOpenAIServer
from lang_serve import serve

import sglr as sgl
from sglr.errors import ProgramError

FIELDS = {"Name": "Alice", "Age": "30", "Job": "engineer"}


def field_model(written_labels: list[str]):
    """A completion "model" that continues a profile; it writes the labels `written_labels`."""

    def complete(prompt: str) -> str:
        labels = list(FIELDS)
        for index in reversed(range(len(labels))):
            if prompt.endswith(labels[index] + ": "):
                rest = "".join(
                    f"{written_labels[j]}: {FIELDS[labels[j]]}\n" for j in range(index + 1, len(labels))
                )
                return FIELDS[labels[index]] + "\n" + rest + "\n"
        return "???\n"

    return complete


def profile_body(s, person):
    s += "Profile of " + person + "\n"
    s += "Name: " + sgl.gen("name", stop="\n") + "\n"
    s += "Age: " + sgl.gen("age", stop="\n") + "\n"
    s += "Job: " + sgl.gen("job", stop="\n") + "\n"


profile = sgl.function(profile_body)
profile_spec = sgl.function(num_api_spec_tokens=64)(profile_body)


def completion_backend(url: str, **kwargs) -> sgl.OpenAI:
    return sgl.OpenAI("gpt-3.5-turbo-instruct", base_url=url + "/v1", api_key="test-key", **kwargs)


def run_profile(program, written_labels):
    server = FakeOpenAIServer(complete=field_model(written_labels))
    with serve(server.app()) as url:
        backend = completion_backend(url)
        state = program.run(person="Alice", backend=backend, temperature=0)
        values = {name: state[name.lower()] for name in FIELDS}
        return values, backend, server, state.text()


def test_speculative_execution_saves_calls_and_prompt_tokens_when_the_model_follows():
    plain_values, plain, _, plain_text = run_profile(profile, ["Name", "Age", "Job"])
    spec_values, spec, server, spec_text = run_profile(profile_spec, ["Name", "Age", "Job"])
    assert plain_values == spec_values == FIELDS
    assert plain_text == spec_text
    assert (plain.num_api_calls, spec.num_api_calls) == (3, 1)
    assert spec.token_usage.prompt_tokens < plain.token_usage.prompt_tokens
    request = server.bodies("/v1/completions")[0]
    assert request["max_tokens"] == 128 and request.get("stop") is None  # one long call without stops


def test_speculative_execution_stays_correct_when_the_model_strays():
    values, spec, _, _ = run_profile(profile_spec, ["Name", "AGE", "JOB"])
    assert values == FIELDS
    assert spec.num_api_calls == 3  # each mismatch forces a fresh call


def test_chat_speculation_generates_each_assistant_turn_in_one_call():
    def chat(messages):
        last = messages[-1]["content"]
        return "Name: Alice\nAge: 30" if last.startswith("Profile") else "Chess, mostly."

    @sgl.function(num_api_spec_tokens=64)
    def chat_profile(s, person):
        s += sgl.system("You write profiles.")
        s += sgl.user("Profile of " + person)
        with s.assistant():
            s += "Name: " + sgl.gen("name", stop="\n") + "\nAge: " + sgl.gen("age", stop="\n")
        s += sgl.user("One hobby?")
        s += sgl.assistant(sgl.gen("hobby", max_tokens=20))

    server = FakeOpenAIServer(chat=chat)
    with serve(server.app()) as url:
        backend = sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k")
        state = chat_profile.run(person="Alice", backend=backend)
        assert (state["name"], state["age"], state["hobby"]) == ("Alice", "30", "Chess, mostly.")
        assert backend.num_api_calls == 2
        first, second = server.bodies("/v1/chat/completions")
        assert first["messages"] == [
            {"role": "system", "content": "You write profiles."},
            {"role": "user", "content": "Profile of Alice"},
        ]
        assert first["max_tokens"] == 64
        assert second["messages"][-2] == {"role": "assistant", "content": "Name: Alice\nAge: 30"}
        assert state.messages()[-1] == {"role": "assistant", "content": "Chess, mostly."}


def test_chat_speculation_gives_up_after_replies_that_ignore_the_template():
    @sgl.function(num_api_spec_tokens=32)
    def strict(s):
        s += sgl.user("Profile")
        with s.assistant():
            s += "Name: " + sgl.gen("name", stop="\n") + "\nAge: " + sgl.gen("age", stop="\n")

    server = FakeOpenAIServer(chat=lambda messages: "I'd rather not.")
    with serve(server.app()) as url:
        backend = sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k")
        with pytest.raises(ProgramError, match="did not follow the program's template in 3 tries"):
            strict.run(backend=backend)["name"]
        assert backend.num_api_calls == 3


def test_chat_models_need_gen_right_after_assistant_without_speculation():
    @sgl.function
    def prefilled(s):
        s += sgl.user("hi")
        with s.assistant():
            s += "Sure: " + sgl.gen("x")

    server = FakeOpenAIServer()
    with serve(server.app()) as url:
        state = prefilled.run(backend=sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k"))
        with pytest.raises(ProgramError, match=r"sgl\.gen must be right after sgl\.assistant"):
            state["x"]


def test_sampling_params_and_extensions_on_the_wire():
    @sgl.function
    def constrained(s):
        s += "Digits: " + sgl.gen("n", max_tokens=5, regex="[0-9]+", top_k=5, stop=["\n", "."])

    server = FakeOpenAIServer(complete=lambda prompt: "12345")
    with serve(server.app()) as url:
        constrained.run(backend=completion_backend(url), temperature=0.3).sync()
        body = server.bodies("/v1/completions")[-1]
        assert body["prompt"] == "Digits: "
        assert (body["max_tokens"], body["temperature"], body["stop"]) == (5, 0.3, ["\n", "."])
        assert (body["regex"], body["top_k"]) == ("[0-9]+", 5)  # extra_body fields
        with pytest.warns(UserWarning, match="not enforced"):
            constrained.run(backend=completion_backend(url, extensions=False)).sync()
        assert "regex" not in server.bodies("/v1/completions")[-1]


def test_streaming_completion_and_chat():
    @sgl.function
    def talk(s):
        s += "Say:" + sgl.gen("said", max_tokens=50)

    @sgl.function
    def chat_talk(s):
        s += sgl.user("Say something")
        s += sgl.assistant(sgl.gen("said", max_tokens=50))

    server = FakeOpenAIServer(complete=lambda p: " streamed text", chat=lambda m: "chat stream")
    with serve(server.app()) as url:
        state = talk.run(backend=completion_backend(url), stream=True)
        assert "".join(state.text_iter("said")) == " streamed text"
        chat_backend = sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k")
        state = chat_talk.run(backend=chat_backend, stream=True)
        assert "".join(state.text_iter("said")) == "chat stream"
        assert chat_backend.token_usage.completion_tokens == len("chat stream")


def mean_choice_logprob(prompt: str, choice: str) -> float:
    values, prev = [], prompt[-1]
    for char in choice:
        values.append(char_logprob(prev, char))
        prev = char
    return sum(values) / len(values)


@pytest.mark.parametrize("choices", [["Paris", "London", "Rome"], ["yes", "no"], ["cat", "category"]])
def test_select_on_a_completion_model_scores_echo_logprobs(choices):
    prompt = "The best answer: "

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("c", choices=choices)

    server = FakeOpenAIServer()
    with serve(server.app()) as url:
        state = pick.run(backend=completion_backend(url))
        scores = [mean_choice_logprob(prompt, c) for c in choices]
        assert state["c"] == choices[scores.index(max(scores))]
        body = server.bodies("/v1/completions")[-1]
        assert body["prompt"] == [prompt + c for c in choices]
        assert body["echo"] is True and body["logprobs"] == 1


def test_select_on_a_chat_model_scores_first_tokens_with_equal_bias():
    choices = ["apple", "banana", "cherry", "date"]

    @sgl.function
    def pick(s):
        s += sgl.user("Pick a fruit")
        s += sgl.assistant(sgl.select("fruit", choices=choices))

    server = FakeOpenAIServer()
    with serve(server.app()) as url:
        backend = sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k", tokenizer=CharTokenizer())
        state = pick.run(backend=backend)
        scores = [char_logprob("t", c[0]) for c in choices]  # the user turn ends with "t"
        assert state["fruit"] == choices[scores.index(max(scores))]
        body = server.bodies("/v1/chat/completions")[-1]
        assert body["logit_bias"] == {str(ord(c[0])): 100 for c in choices}
        assert (body["max_tokens"], body["top_logprobs"]) == (1, 20)


def test_select_by_logit_bias_walks_tokens_greedily():
    choices = ["cat", "car", "dog"]
    prompt = "Animal: "

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("animal", choices=choices)

    server = FakeOpenAIServer()
    with serve(server.app()) as url:
        backend = completion_backend(url, tokenizer=CharTokenizer(), select_method="logit_bias")
        state = pick.run(backend=backend)
        # Independent greedy walk: best first char among {c, d}; after "ca", best of {t, r}.
        first = max("cd", key=lambda ch: char_logprob(prompt[-1], ch))
        expected = "dog" if first == "d" else ("ca" + max("tr", key=lambda ch: char_logprob("a", ch)))
        assert state["animal"] == expected
        assert backend.num_api_calls == (1 if first == "d" else 2)  # "a" after "c" is forced
