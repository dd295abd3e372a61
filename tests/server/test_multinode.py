"""Multi-node tensor parallelism as two "nodes" on loopback (CPU, gloo): `--nnodes 2` with
`--tp-size 2` puts one rank on each; node 0 serves HTTP, node 1 only runs its rank. Greedy
output equals a single-process engine's; stopping node 0 stops node 1's rank and node 1 exits
cleanly, leaving no process behind."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from sglr.engine.engine import Engine
from sglr.errors import EngineConfigError
from sglr.testing.processes import assert_gone, start_worker

PROMPT = "The quick brown fox"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_nodes_on_loopback_serve_like_one_process(tiny_dir: Path) -> None:
    with Engine(model_path=str(tiny_dir), device="cpu", max_total_tokens=8192) as engine:
        expected = engine.generate(PROMPT, {"max_new_tokens": 12, "temperature": 0})["text"]
    addr = f"127.0.0.1:{free_port()}"
    group = ["--tp-size", "2", "--nnodes", "2", "--dist-init-addr", addr]
    follower = subprocess.Popen(
        [sys.executable, "-m", "sglr", "--model-path", str(tiny_dir), "--device", "cpu",
         "--max-total-tokens", "8192", "--log-level", "warning", *group, "--node-rank", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    head = None
    try:
        head = start_worker(tiny_dir, *group, "--node-rank", "0")
        # One rank process per node.
        assert len(head.descendants()) == 1
        follower_ranks = psutil.Process(follower.pid).children(recursive=True)
        assert len(follower_ranks) == 1
        with httpx.Client(base_url=head.url, timeout=120) as client:
            body = {"text": PROMPT, "sampling_params": {"max_new_tokens": 12, "temperature": 0}}
            response = client.post("/generate", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["text"] == expected
        assert head.stop() == 0, head.output()
        output, _ = follower.communicate(timeout=60)
        assert follower.returncode == 0, output
        assert "node 1 of 2: ranks 1-1" in output and "sglr-server: shut down" in output
        assert_gone(follower_ranks)
    finally:
        if head is not None and head.popen.poll() is None:
            head.popen.kill()
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_multinode_settings_are_checked(tiny_dir: Path) -> None:
    with pytest.raises(EngineConfigError, match="dist_init_addr"):
        Engine(model_path=str(tiny_dir), device="cpu", tp_size=2, nnodes=2)
    with pytest.raises(EngineConfigError, match="does not split"):
        Engine(model_path=str(tiny_dir), device="cpu", tp_size=3, nnodes=2, dist_init_addr="127.0.0.1:1")
    with pytest.raises(EngineConfigError, match="node_rank"):
        Engine(model_path=str(tiny_dir), device="cpu", tp_size=2, nnodes=2, node_rank=2, dist_init_addr="h:1")
    with pytest.raises(EngineConfigError, match="node_rank > 0"):
        Engine(model_path=str(tiny_dir), device="cpu", tp_size=2, nnodes=2, node_rank=1, dist_init_addr="h:1")
    result = subprocess.run(
        [sys.executable, "-m", "sglr", "--model-path", str(tiny_dir), "--node-rank", "1", "--nnodes", "2",
         "--tp-size", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "dist_init_addr" in result.stderr and "Traceback" not in result.stderr
