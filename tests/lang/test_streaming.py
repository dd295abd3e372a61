"""Streaming: `stream=True`, `text_iter` and `text_async_iter` yield text in order as it grows."""

from __future__ import annotations

import asyncio
import threading

from lang_fake_backend import RecordingBackend

import sglr as sgl


@sgl.function
def story(s, topic):
    s += "Topic: " + topic + "\n"
    s += "Story:" + sgl.gen("story", max_tokens=64)
    s += "\nMoral:" + sgl.gen("moral", max_tokens=16)


def replies(prompt: str, sp) -> str:
    return " a long and winding tale" if prompt.endswith("Story:") else " be kind"


def test_text_iter_yields_prompt_and_generated_text_in_order():
    state = story.run(topic="owls", stream=True, backend=RecordingBackend(reply=replies))
    chunks = list(state.text_iter())
    assert "".join(chunks) == "Topic: owls\nStory: a long and winding tale\nMoral: be kind"
    assert state.text() == "".join(chunks)


def test_text_iter_of_a_variable_yields_only_that_variable():
    state = story.run(topic="owls", stream=True, backend=RecordingBackend(reply=replies))
    assert "".join(state.text_iter("moral")) == " be kind"
    assert "".join(state.text_iter("story")) == " a long and winding tale"
    assert state["story"] == " a long and winding tale"


def test_chunks_arrive_before_the_generation_finishes():
    gate = threading.Event()

    class GatedBackend(RecordingBackend):
        def generate_stream(self, s, sampling_params):
            yield "first", {}
            assert gate.wait(10)
            yield " second", {}

    @sgl.function
    def two(s):
        s += sgl.gen("out")

    state = two.run(stream=True, backend=GatedBackend())
    iterator = state.text_iter("out")
    assert next(iterator) == "first"  # delivered while the backend is still blocked
    gate.set()
    assert "".join(iterator) == " second"


def test_text_async_iter_with_meta_data():
    state = story.run(topic="owls", stream=True, backend=RecordingBackend(reply=replies, chunk_chars=3))

    async def collect():
        out = []
        async for chunk, meta in state.text_async_iter("story", return_meta_data=True):
            out.append((chunk, meta))
        return out

    pairs = asyncio.run(collect())
    assert "".join(chunk for chunk, _ in pairs) == " a long and winding tale"
    assert all(isinstance(meta, dict) for _, meta in pairs)


def test_non_stream_iterators_yield_the_final_value_once():
    state = story.run(topic="owls", backend=RecordingBackend(reply=replies))
    assert list(state.text_iter("moral")) == [" be kind"]

    async def collect():
        return [chunk async for chunk in state.text_async_iter()]

    assert asyncio.run(collect()) == [state.text()]
