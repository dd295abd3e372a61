"""run_batch: input order, threads, progress bar, argument forms and the prefix hint."""

from __future__ import annotations

import time

import pytest
from lang_fake_backend import RecordingBackend

import sglr as sgl

INSTRUCTIONS = "You are a careful assistant. Answer the question in one short sentence, please.\n"


@sgl.function
def answer(s, question):
    s += INSTRUCTIONS
    s += "Question: " + question + "\nAnswer:" + sgl.gen("answer", max_tokens=16)


def slow_for_early_items(prompt: str, sp) -> str:
    number = int(prompt.split("Question: q")[1].split("\n")[0])
    time.sleep(0.002 * (10 - number))  # earlier items finish later
    return f" a{number}"


def test_results_keep_input_order():
    backend = RecordingBackend(reply=slow_for_early_items)
    states = answer.run_batch([{"question": f"q{i}"} for i in range(10)], backend=backend, num_threads=10)
    assert [state["answer"] for state in states] == [f" a{i}" for i in range(10)]


def test_positional_items_one_thread_and_progress_bar(capsys):
    backend = RecordingBackend(reply=slow_for_early_items)
    states = answer.run_batch(
        [[f"q{i}"] for i in range(3)], backend=backend, num_threads=1, progress_bar=True
    )
    assert [state["answer"] for state in states] == [" a0", " a1", " a2"]
    assert "3/3" in capsys.readouterr().err
    with pytest.raises(ValueError, match="mismatch"):
        answer.run_batch([["q", "extra"]], backend=backend)
    assert answer.run_batch([], backend=backend) == []
    with pytest.raises(ValueError, match="num_threads"):
        answer.run_batch([["q1"], ["q2"]], backend=backend, num_threads=0)


def test_generator_style_yields_in_order():
    backend = RecordingBackend(reply=slow_for_early_items)
    results = answer.run_batch(
        [{"question": f"q{i}"} for i in range(5)], backend=backend, generator_style=True
    )
    assert [state["answer"] for state in results] == [f" a{i}" for i in range(5)]


def test_sampling_kwargs_apply_to_every_program():
    backend = RecordingBackend()
    answer.run_batch([{"question": "q1"}, {"question": "q2"}], backend=backend, temperature=0.0, top_p=0.5)
    params = [call.params for call in backend.of_kind("generate")]
    assert [(p.temperature, p.top_p) for p in params] == [(0.0, 0.5)] * 2
    with pytest.raises(TypeError, match="unexpected"):
        answer.run_batch([{"question": "q"}], backend=backend, temprature=0.0)


def test_constant_prefix_is_cached_once_before_the_batch():
    backend = RecordingBackend()
    answer.run_batch([{"question": f"q{i}"} for i in range(4)], backend=backend)
    kinds = [call.kind for call in backend.calls if call.kind in ("cache_prefix", "generate")]
    assert kinds == ["cache_prefix"] + ["generate"] * 4
    assert backend.of_kind("cache_prefix")[0].text == INSTRUCTIONS + "Question: "


def test_no_prefix_hint_for_one_program_or_a_short_prefix():
    backend = RecordingBackend()
    answer.run_batch([{"question": "q"}], backend=backend)

    @sgl.function
    def short(s, x):
        s += "Q: " + x + sgl.gen("a")

    short.run_batch([{"x": "1"}, {"x": "2"}], backend=backend)
    assert "cache_prefix" not in backend.kinds()
