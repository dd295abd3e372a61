"""`sglr-server` / `python -m sglr` as a process: prints where it listens, serves, and shuts
down cleanly on SIGTERM (also with a stream in flight); bad flags and busy ports fail fast."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

LISTENING = re.compile(r"sglr-server: serving .* on (http://127\.0\.0\.1:\d+)")


def _start(tiny_dir: Path, *extra: str) -> tuple[subprocess.Popen, str, list[str]]:
    argv = [sys.executable, "-m", "sglr", "--model-path", str(tiny_dir), "--port", "0", "--device", "cpu",
            "--max-total-tokens", "4096", "--log-level", "warning", *extra]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = LISTENING.search(line)
        if match:
            return process, match.group(1), lines
    process.kill()
    raise AssertionError("the server did not report its address:\n" + "".join(lines))


def _finish(process: subprocess.Popen, lines: list[str]) -> tuple[int, str]:
    out, _ = process.communicate(timeout=60)
    return process.returncode, "".join(lines) + out


def test_serves_then_shuts_down_cleanly_on_sigterm(tiny_dir: Path) -> None:
    process, url, lines = _start(
        tiny_dir, "--shutdown-timeout", "2", "--api-key", "k", "--served-model-name", "tiny"
    )
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/health").status_code == 200
            auth = {"Authorization": "Bearer k"}
            assert client.get("/v1/models", headers=auth).json()["data"][0]["id"] == "tiny"
            assert client.get("/v1/models").status_code == 401
            out = client.post(
                "/generate", headers=auth, json={"text": "hi", "sampling_params": {"max_new_tokens": 3}}
            )
            assert out.json()["meta_info"]["completion_tokens"] <= 3
            # A stream still running when SIGTERM arrives: it gets the grace period, then ends.
            body = {
                "text": "go",
                "stream": True,
                "sampling_params": {"max_new_tokens": 3500, "ignore_eos": True},
            }
            received: list[str] = []
            streaming = threading.Event()

            def stream() -> None:
                with client.stream("POST", "/generate", json=body, headers=auth) as response:
                    for line in response.iter_lines():
                        if line:
                            received.append(line)
                            streaming.set()

            reader = threading.Thread(target=stream, daemon=True)
            reader.start()
            assert streaming.wait(60), "the stream sent nothing"
            process.send_signal(signal.SIGTERM)
            code, output = _finish(process, lines)
            reader.join(10)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, output
    assert not reader.is_alive()
    assert "sglr-server: shut down" in output
    assert "Traceback" not in output and "ERROR" not in output
    # The stream outlived the grace period: it was aborted short of its 3500 tokens, and still
    # ended properly.
    assert received[-1] == "data: [DONE]"
    meta_info = json.loads(received[-2].removeprefix("data: "))["meta_info"]
    assert meta_info["finish_reason"]["type"] == "abort"
    assert meta_info["completion_tokens"] < 3500


def test_busy_port_fails_fast(tiny_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "sglr", "--model-path", str(tiny_dir), "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


BAD_FLAGS = {
    "--schedule-policy nope": "invalid choice: 'nope'",
    "--max-total-tokens 0": "max_total_tokens must be a positive integer",
    "--model-path /no/such/model": "sglr-server:",
    "--chat-template not-a-template": "is not a file, a Jinja template",
    "--tp-size 2 --single-process": "multiprocess cannot be False",
    "--lora-target-modules all q_proj": "'all' stands alone",
    "--lora-paths {oops": "not valid JSON",
    "--max-loras-per-batch 0": "max_loras_per_batch",
    "--allowed-lora-path /no/such/dir": "is not an existing directory",
    "--reasoning-parser nope": "invalid choice: 'nope' (choose from 'deepseek-r1', 'qwen3')",
}


@pytest.fixture(scope="module")
def bad_flag_runs(tiny_dir: Path) -> dict[str, tuple[int, str]]:
    """`(exit code, stderr)` of a server started with each of `BAD_FLAGS` (all at once: each
    process spends its time starting Python and failing)."""
    base = [sys.executable, "-m", "sglr", "--model-path", str(tiny_dir), "--port", "0", "--device", "cpu"]
    processes = {
        flags: subprocess.Popen(
            [*base, *flags.split()], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for flags in BAD_FLAGS
    }
    runs = {}
    try:
        for flags, process in processes.items():
            _, stderr = process.communicate(timeout=120)
            runs[flags] = (process.returncode, stderr)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return runs


@pytest.mark.parametrize("flags", list(BAD_FLAGS))
def test_bad_flags_fail_with_a_message(bad_flag_runs: dict[str, tuple[int, str]], flags: str) -> None:
    returncode, stderr = bad_flag_runs[flags]
    assert returncode != 0
    assert BAD_FLAGS[flags] in stderr
    assert "Traceback" not in stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "sglr-server"
    assert script.exists(), "reinstall sglr (pip install -e .) to create the sglr-server script"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--model-path" in result.stdout and "--enable-metrics" in result.stdout


def test_the_server_loop_is_uvloop_where_installed() -> None:
    """sglr-server's event loop: uvloop (a dependency on Linux) rather than asyncio's selector
    loop, whose transports cost more CPU per streamed token."""
    import asyncio

    import uvloop

    from sglr.http.listen import run_event_loop

    seen = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()))

    run_event_loop(main())
    assert seen == [uvloop.Loop]
