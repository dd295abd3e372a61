"""`sgl.gen(..., structural_tag=...)`: the tag reaches the engine's sampling params (the output
obeys it), the native server's `sampling_params` and an OpenAI server's `response_format`; a
malformed tag is refused naming its part."""

from __future__ import annotations

import json
import re

import pytest
from lang_fake_native_server import FakeNativeServer
from lang_fake_openai_server import FakeOpenAIServer
from lang_serve import serve

import sglr as sgl
from sglr.lang.gen_params import GenParams

# Every space opens a segment: ` =`, an integer, `;`. Free text holds no other space.
TAG = {
    "structures": [{"begin": " =", "schema": {"type": "integer"}, "end": ";"}],
    "triggers": [" "],
}
# Free text without spaces, segments, and at the end perhaps one the token limit cut.
OBEYS_TAG = re.compile(r"(?:[^ ]| =-?\d+;)*(?: (?:=-?\d*)?)?", re.DOTALL)


@sgl.function
def _write(s, tag):
    s += "Some words about the sea:" + sgl.gen("x", max_tokens=24, temperature=0, structural_tag=tag)


def test_the_engine_output_obeys_the_tag(tiny_engine) -> None:
    free = _write.run(backend=tiny_engine, tag=None)["x"]
    assert " " in free  # without the tag this model writes spaces ...
    tagged = _write.run(backend=tiny_engine, tag=TAG)["x"]
    assert OBEYS_TAG.fullmatch(tagged), tagged  # ... with it, only those that open a segment
    assert tagged != free


def test_the_tag_goes_to_servers_as_their_api_takes_it() -> None:
    native = FakeNativeServer(reply=lambda prompt, sp: " =1;")
    with serve(native.app()) as url:
        _write.run(backend=sgl.RuntimeEndpoint(url, chat_template_name="default"), tag=TAG).sync()
    assert json.loads(native.generate_bodies()[-1]["sampling_params"]["structural_tag"]) == TAG

    @sgl.function
    def chat(s):
        s += sgl.user("hi")
        s += sgl.assistant(sgl.gen("x", max_tokens=4, structural_tag=json.dumps(TAG)))

    server = FakeOpenAIServer(chat=lambda messages: " =1;")
    with serve(server.app()) as url:
        chat.run(backend=sgl.OpenAI("gpt-4o-mini", base_url=url + "/v1", api_key="k")).sync()
    body = server.bodies("/v1/chat/completions")[-1]
    assert body["response_format"] == {"type": "structural_tag", **TAG}


def test_a_malformed_tag_is_refused_naming_its_part() -> None:
    missing = {**TAG, "structures": [{"begin": " =", "end": ";"}]}
    with pytest.raises(ValueError, match=r"invalid structural_tag: structures\[0\]\.schema"):
        GenParams(structural_tag=missing)
    assert GenParams(structural_tag=TAG).structural_tag == json.dumps(TAG)
