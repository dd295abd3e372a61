"""`sglr-server` as a subprocess for benchmarks: started on a free port, its address read from
what it prints."""

from __future__ import annotations

import re
import subprocess
import sys


def launch_server(argv: list[str]) -> tuple[subprocess.Popen, str]:
    """The server process (`python -m sglr --port 0 ... argv`) and its URL once it serves."""
    command = [sys.executable, "-m", "sglr", "--port", "0", "--log-level", "warning", *argv]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        match = re.search(r"serving .* on (http://\S+)", line)
        if match:
            return process, match.group(1)
    raise SystemExit(f"the server exited with status {process.wait()}")
