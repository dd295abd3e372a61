"""A node other than 0 of a multi-node tensor-parallel group: its ranks, and nothing else.

`sglr-server --nnodes N --node-rank K --dist-init-addr HOST:PORT` on node K > 0 starts one
worker process per local rank (`EngineConfig.local_ranks`), each loading the model and joining
the group at node 0's address; they follow rank 0's batches (`ModelRunner.follow`) until rank 0
stops them. No HTTP front, no scheduler: node 0 serves. The workers die with this process
(`orphans.die_with_parent`); SIGTERM / SIGINT here stop them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import time
from typing import Any

from sglr.engine.config import EngineConfig
from sglr.engine.worker.launch import dist_init_method, start_worker
from sglr.engine.worker.spec import WorkerSpec

logger = logging.getLogger("sglr.engine")

_POLL_S = 0.2
_STOP_TIMEOUT_S = 30.0


def run_follower_node(cfg: EngineConfig, runner_config: Any) -> int:
    """Runs this node's ranks until they exit; 0 when every one exited cleanly."""
    from sglr.model.config import load_model_config
    from sglr.model.parallel import check_tensor_parallel
    from sglr.model.runner import resolve_model_dir

    assert cfg.nnodes > 1 and cfg.node_rank > 0
    resolved = dataclasses.replace(
        runner_config, model_path=resolve_model_dir(runner_config, tensor_parallel=True)
    )
    check_tensor_parallel(load_model_config(resolved.model_path), cfg.tp_size)
    num_threads = max(1, (os.cpu_count() or 1) // cfg.ranks_per_node)
    procs: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for rank in cfg.local_ranks:
            spec = WorkerSpec(
                rank=rank,
                tp_size=cfg.tp_size,
                parent_pid=os.getpid(),
                engine_config=cfg,
                runner_config=resolved,
                max_running_requests=0,  # followers never schedule
                chunked_prefill_size=0,
                commands_endpoint="",  # rank 0's alone
                outputs_endpoint="",
                dist_init_method=dist_init_method(cfg),
                num_threads=num_threads,
            )
            procs.append(start_worker(spec))
        while not stopping and any(proc.poll() is None for proc in procs):
            time.sleep(_POLL_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    codes = [proc.returncode for proc in procs]
    if stopping:
        return 0
    if any(codes):
        logger.error("node %d: ranks exited with codes %s", cfg.node_rank, codes)
        return 1
    return 0
