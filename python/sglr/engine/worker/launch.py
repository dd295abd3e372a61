"""Starting the worker processes: a fresh interpreter per rank with its spec on stdin, and the
address where the tensor-parallel ranks meet."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
from typing import Any

from sglr.engine.worker.spec import WorkerSpec


def start_worker(spec: WorkerSpec) -> subprocess.Popen[bytes]:
    """A fresh interpreter running `process.py`, its spec pickled on stdin (unlike
    multiprocessing's spawn, it never re-imports the caller's `__main__`)."""
    proc = subprocess.Popen([sys.executable, "-m", "sglr.engine.worker.process"], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
    proc.stdin.close()
    return proc


def dist_init_method(engine_config: Any) -> str:
    """Where the ranks meet: `--dist-init-addr host:port`, else a free local port (or
    `--nccl-port`)."""
    if engine_config.dist_init_addr:
        return f"tcp://{engine_config.dist_init_addr}"
    port = engine_config.nccl_port
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"
