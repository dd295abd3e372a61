"""The examples run end to end against fake servers (OpenAI-compatible and native), the raw
`openai` versions produce the same results, and the sglr versions are the shorter programs."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re

import jsonschema
import pytest
from lang_fake_native_server import FakeNativeServer
from lang_fake_openai_server import FakeOpenAIServer
from lang_serve import serve

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")

CITY_JSON = (
    '{"name": "Paris", "country": "France", "population_millions": 2.1, "landmarks": ["Eiffel Tower"]}'
)
ANSWERS = {"largest ocean": "Pacific Ocean", "Hamlet": "Shakespeare", "frozen water": "Ice"}


def scripted_chat(messages: list[dict]) -> str:
    """A chat "model" that follows each example's instructions."""
    last = messages[-1]["content"]
    if "Judge the essay" in last:
        return "Judgment: Solid on this dimension. END"
    if "Summarize them in one sentence" in last:
        return "Summary: A clear, short essay.\nGrade: B+"
    if "Return the summary and grade as JSON" in last:
        return '{"summary": "A clear, short essay.", "grade": "B+"}'
    if "Give three short tips" in last:
        return "1. Drink water\n2. Sleep well\n3. Walk daily"
    if last.startswith("Expand this tip"):
        return "Paragraph on" + last.split(":", 1)[1] + "."
    if "Summarize these expanded tips" in last:
        return "In summary, small habits add up."
    for key, answer in ANSWERS.items():
        if key in last:
            return answer
    if last.startswith("Question: What is 17"):
        return "Thought: I should compute it.\ncalculate[17 * 23 + 4]"
    if last.startswith("Observation:"):
        return "Thought: That is the result.\nfinish[" + last.split(":")[1].strip() + "]"
    if "Solve it one step per reply" in last:
        return "8 / 4 = 2"
    if last.startswith("Rate how promising"):
        return "7"
    if last == "Next step.":
        return "6 * 2 * 2 = 24"
    if "final expression" in last:
        return "6 * 2 * (8 / 4)"
    if last.startswith("Extract the city"):
        return CITY_JSON
    return "Answer to: " + last


def top_logprobs(messages: list[dict]) -> list[tuple[str, float]]:
    return [("yes", -0.05), ("no", -3.2), ("maybe", -5.0)]


@pytest.fixture
def examples(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES_DIR)

    def load(name: str):
        if "/" not in name:
            return importlib.import_module(name)
        spec = importlib.util.spec_from_file_location(
            name.replace("/", "_"), os.path.join(EXAMPLES_DIR, name)
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def openai_url():
    server = FakeOpenAIServer(chat=scripted_chat, chat_top_logprobs=top_logprobs)
    with serve(server.app()) as url:
        yield url + "/v1", server


def openai_argv(url: str) -> list[str]:
    return ["--backend", "openai", "--base-url", url, "--model", "gpt-4o-mini", "--api-key", "k"]


def test_essay_judge_and_its_raw_openai_version_agree(examples, openai_url, capsys):
    url, server = openai_url
    verdict = examples("essay_judge").main(openai_argv(url))
    assert verdict == {"summary": "A clear, short essay.", "grade": "B+"}
    sglr_calls = len(server.requests)
    raw = examples("raw_openai/essay_judge.py").main(["--base-url", url, "--api-key", "k"])
    assert raw == verdict
    # select + 6 branches + merge + JSON: the same calls in both versions
    assert sglr_calls == len(server.requests) - sglr_calls == 9
    merge_request = server.bodies("/v1/chat/completions")[-1]
    assert merge_request["regex"] == examples("essay_judge").VERDICT_REGEX


def test_tip_suggestion_and_its_raw_openai_version_agree(examples, openai_url):
    url, server = openai_url
    summary = examples("tip_suggestion").main(openai_argv(url))
    raw_summary = examples("raw_openai/tip_suggestion.py").main(["--base-url", url, "--api-key", "k"])
    assert summary.strip() == raw_summary.strip() == "small habits add up."
    expand_requests = [
        b for b in server.bodies("/v1/chat/completions") if "Expand" in b["messages"][-1]["content"]
    ]
    assert sorted(b["messages"][-1]["content"] for b in expand_requests) == sorted(
        f"Expand this tip about staying healthy into one short paragraph: {tip}"
        for tip in ["Drink water", "Sleep well", "Walk daily"] * 2
    )


def test_react_agent_uses_its_python_tool(examples, openai_url):
    url, _ = openai_url
    module = examples("react_agent")
    assert module.calculate("2 * (3 + 4)") == "14"
    assert module.calculate("__import__('os')").startswith("error")
    assert module.main(openai_argv(url)) == "395"


def test_tree_of_thought_few_shot_json_and_chat_examples(examples, openai_url):
    url, server = openai_url
    assert examples("tree_of_thought").main(openai_argv(url)) == "6 * 2 * (8 / 4)"
    assert examples("few_shot_qa").main(openai_argv(url)) == ["Pacific Ocean", "Shakespeare", "Ice"]
    module = examples("json_extraction")
    city = module.main(openai_argv(url))
    jsonschema.validate(city, module.CITY_SCHEMA)
    request = server.bodies("/v1/chat/completions")[-1]
    assert request["response_format"]["json_schema"]["schema"] == module.CITY_SCHEMA
    messages = examples("multi_turn_chat").main(openai_argv(url))
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3
    assert messages[-1]["content"] == "Answer to: What is 2 + 3?"


def test_examples_on_a_native_server(examples):
    def reply(prompt: str, sp: dict) -> str:
        for key, answer in ANSWERS.items():
            if re.search(key + r"[^\n]*\?<\|eot_id\|>", prompt):
                return " " + answer
        return CITY_JSON if sp.get("json_schema") else "ok"

    server = FakeNativeServer(reply=reply)
    with serve(server.app()) as url:
        argv = ["--backend", "runtime", "--url", url]
        assert examples("few_shot_qa").main(argv) == ["Pacific Ocean", "Shakespeare", "Ice"]
        first = server.generate_bodies()[0]
        assert first["sampling_params"] == {"max_new_tokens": 0}  # the few-shot prefix, cached once
        assert "Q: What gas do plants absorb from the air?\nA: Carbon dioxide" in first["text"]
        module = examples("json_extraction")
        assert module.main(argv)["name"] == "Paris"
        assert (
            json.loads(server.generate_bodies()[-1]["sampling_params"]["json_schema"]) == module.CITY_SCHEMA
        )


def test_examples_on_the_in_process_engine(examples, tiny_llama_dir):
    """The default backend: the examples run on an in-process engine (here the random tiny
    model, so the checks are about the programs' mechanics, not the answers)."""
    argv = ["--backend", "engine", "--model-path", str(tiny_llama_dir), "--device", "cpu"]
    backends = examples("lang_backends")
    engine = backends.shared_engine(str(tiny_llama_dir), "cpu")
    try:
        answers = examples("few_shot_qa").main(argv)
        assert len(answers) == 3 and all(isinstance(a, str) for a in answers)
        messages = examples("multi_turn_chat").main(argv)
        assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3
        assert len(examples("parallel_questions").main(argv)) == 4
        quiz = examples("multiple_choice")
        picks = quiz.main(argv)
        assert [pick in options for pick, (_, options) in zip(picks, quiz.QUIZ, strict=True)] == [True] * 5
        assert isinstance(examples("tip_suggestion").main(argv), str)
        examples("react_agent").main(argv)  # random text: the agent stops without an action
        stats = engine.get_stats()
        assert stats["num_cached_prompt_tokens"] > 0  # few-shot prefix, chat history, fork prefix
        assert stats["max_decode_batch_size"] >= 4  # forked branches and batch programs decode together
        engine.check_invariants()
    finally:
        backends.close_engines()


def test_sglr_examples_are_shorter_than_raw_openai_versions(examples, capsys):
    line_counts = examples("line_counts")
    line_counts.main()
    table = capsys.readouterr().out
    print(table)
    for name, sglr_lines, raw_lines in line_counts.line_counts():
        assert name in table
        assert 0 < sglr_lines < raw_lines, name
