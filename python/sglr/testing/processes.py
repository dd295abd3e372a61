"""`sglr-server` and `sglr-router` as subprocesses for tests: started on free loopback ports,
their address read from what they print, and stopped with every child process reaped."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

_ADDRESS = re.compile(r"sglr-(?:server|router): \w+ .* on (http://127\.0\.0\.1:\d+)")


@dataclass
class Process:
    popen: subprocess.Popen
    url: str
    lines: list[str] = field(default_factory=list)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.popen.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signals the process, waits for it and asserts no child of it outlives it."""
        children = self.descendants()
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait(10)
        assert_gone(children)
        return code


def assert_gone(processes: list[psutil.Process], timeout: float = 30) -> None:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for process in alive:
        process.kill()
    assert not alive, f"orphaned processes: {alive}"


def start(argv: list[str], timeout: float = 120) -> Process:
    popen = subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert popen.stdout is not None
    while time.monotonic() < deadline:
        line = popen.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = _ADDRESS.search(line)
        if match:
            process = Process(popen, match.group(1), lines)
            # Keep draining the pipe so a chatty process never blocks on a full one.
            threading.Thread(target=_drain, args=(popen, lines), daemon=True).start()
            return process
    popen.kill()
    raise AssertionError("the process did not report its address:\n" + "".join(lines))


def _drain(popen: subprocess.Popen, lines: list[str]) -> None:
    assert popen.stdout is not None
    for line in popen.stdout:
        lines.append(line)


def start_worker(model_dir: Path, *extra: str) -> Process:
    argv = ["-m", "sglr", "--model-path", str(model_dir), "--port", "0", "--device", "cpu"]
    return start([*argv, "--max-total-tokens", "8192", "--log-level", "warning", *extra])


def start_router(worker_urls: list[str], *extra: str) -> Process:
    argv = ["-m", "sglr.router", "--port", "0", "--log-level", "warning"]
    return start([*argv, "--health-check-interval", "0.5", "--worker-urls", *worker_urls, *extra])
