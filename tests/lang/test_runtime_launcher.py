"""`sgl.Runtime`: starts a real sglr-server (tiny model) that programs run on, with the same
results as the in-process engine; process handling with stand-in servers; a clear error when the
server module is missing."""

from __future__ import annotations

import json
import os
import sys

import pytest

import sglr as sgl
from sglr.errors import BackendUnavailableError
from sglr.lang.backend.runtime import server_args_to_cli

HERE = os.path.dirname(os.path.abspath(__file__))

STAND_IN = """
import argparse

import uvicorn
from lang_fake_native_server import FakeNativeServer

parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
parser.add_argument("--log-level")
parser.add_argument("--model-path")
parser.add_argument("--trust-remote-code", action="store_true")
args = parser.parse_args()
assert args.trust_remote_code
server = FakeNativeServer(reply=lambda prompt, sp: " from the child", model_path=args.model_path)
uvicorn.run(server.app(), host=args.host, port=args.port, log_level="error")
"""


def test_missing_server_module_raises_a_clear_error():
    with pytest.raises(BackendUnavailableError, match=r"is missing.*RuntimeEndpoint\(url\)"):
        sgl.Runtime(model_path="m", server_module="sglr.server.no_such_launcher")
    assert issubclass(BackendUnavailableError, NotImplementedError)


def test_server_args_become_flags():
    argv = server_args_to_cli({"model_path": "m", "tp_size": 2, "trust_remote_code": True, "quiet": False})
    assert argv == ["--model-path", "m", "--tp-size", "2", "--trust-remote-code"]


@pytest.fixture
def stand_in_module(tmp_path, monkeypatch):
    (tmp_path / "stand_in_launch.py").write_text(STAND_IN)
    (tmp_path / "dying_launch.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), HERE, *sys.path]))
    return tmp_path


def test_runtime_starts_serves_and_shuts_down(stand_in_module):
    runtime = sgl.Runtime(
        model_path="Qwen/Qwen2-0.5B-Instruct",
        trust_remote_code=True,
        port=31000,
        server_module="stand_in_launch",
        launch_timeout=60,
    )
    try:
        assert runtime.endpoint.get_chat_template().name == "qwen"

        @sgl.function
        def hello(s):
            s += "Hi" + sgl.gen("reply", max_tokens=32)

        assert hello.run(backend=runtime)["reply"] == " from the child"
        assert sgl.get_server_info(runtime)["version"] == "fake-0"
    finally:
        process = runtime.process
        runtime.shutdown()
    assert process.poll() is not None


def test_runtime_reports_a_server_that_dies_during_startup(stand_in_module):
    with pytest.raises(RuntimeError, match=r"Initialization failed.*code 3"):
        sgl.Runtime(model_path="m", server_module="dying_launch", launch_timeout=60)


@sgl.function
def plain_program(s, topic):
    s += "Topic: " + topic + "\nKind:" + sgl.select("kind", choices=[" animal", " plant", " stone"]) + "\n"
    forks = s.fork(2)
    forks += lambda i: f"Fact {i + 1}:" + sgl.gen("fact", max_tokens=6, ignore_eos=True)
    forks.join()
    s += "Summary:" + sgl.gen("summary", max_tokens=8, stop_regex=r"\n\n")


def test_runtime_runs_programs_on_a_real_sglr_server(tiny_llama_dir, tiny_engine):
    runtime = sgl.Runtime(
        model_path=str(tiny_llama_dir), device="cpu", max_total_tokens=8192, port=31500, launch_timeout=180
    )
    try:
        over_http = plain_program.run(topic="cats", backend=runtime, temperature=0)
        endpoint = sgl.RuntimeEndpoint(runtime.url)
        again = plain_program.run(topic="cats", backend=endpoint, temperature=0)
        raw = json.loads(runtime.generate("Topic: dogs", {"max_new_tokens": 5, "temperature": 0}))
        assert sgl.get_server_info(runtime)["model_path"] == str(tiny_llama_dir)
        assert sgl.flush_cache(runtime) is True
    finally:
        process = runtime.process
        runtime.shutdown()
    assert process.returncode == 0  # SIGTERM: a clean shutdown
    in_process = plain_program.run(topic="cats", backend=tiny_engine, temperature=0)
    for name in ("kind", "fact", "summary"):
        assert over_http[name] == again[name] == in_process[name], name
    assert over_http.text() == in_process.text()
    assert raw["text"] == tiny_engine.generate("Topic: dogs", {"max_new_tokens": 5, "temperature": 0})["text"]
