"""`sgl.Runtime(...)` starts a real sglr-server process (`python -m sglr`) and
programs run against it; and with no `--model-path` the server serves the embedded default."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

import sglr as sgl


def test_runtime_launches_sglr_server_and_runs_a_program(tiny_dir: Path) -> None:
    runtime = sgl.Runtime(
        model_path=str(tiny_dir), device="cpu", max_total_tokens=4096, port=31800, launch_timeout=120
    )
    try:

        @sgl.function
        def hello(s):
            s += "Hello" + sgl.gen("reply", max_tokens=5, temperature=0, ignore_eos=True)

        state = hello.run(backend=runtime)
        assert isinstance(state["reply"], str) and state["reply"]
        info = sgl.get_server_info(runtime)
        assert info["model_path"] == str(tiny_dir) and info["max_total_num_tokens"] == 4096
    finally:
        process = runtime.process
        runtime.shutdown()
    assert process is not None and process.returncode == 0


def test_no_model_path_serves_the_embedded_default() -> None:
    argv = [sys.executable, "-m", "sglr", "--port", "0", "--device", "cpu", "--max-total-tokens", "1024",
            "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            match = re.search(r"serving (.*) on (http://\S+)", line)
            if match:
                url = match.group(2)
                assert "SmolLM2" in match.group(1)
                break
        assert url is not None, "the server did not start"
        reply = httpx.post(
            url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4, "temperature": 0},
            timeout=120,
        ).json()
        assert reply["usage"]["completion_tokens"] <= 4 and reply["choices"][0]["message"]["content"]
        assert "SmolLM2" in httpx.get(url + "/model_info").json()["model_path"]
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert process.returncode == 0
