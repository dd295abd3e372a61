"""`sgl.Runtime`: process handling with stand-in servers; a clear error when the server module
is missing."""

from __future__ import annotations

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
