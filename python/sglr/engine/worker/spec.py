"""`WorkerSpec`: everything a worker process needs to start (picklable: it crosses `spawn`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerSpec:
    rank: int
    tp_size: int
    parent_pid: int
    engine_config: Any  # EngineConfig
    runner_config: Any  # RunnerConfig, with the resolved model directory
    max_running_requests: int
    chunked_prefill_size: int
    commands_endpoint: str  # rank 0 reads control messages here
    outputs_endpoint: str  # rank 0 writes outputs and replies here
    dist_init_method: str | None  # torch.distributed rendezvous (tp > 1)
    num_threads: int  # torch threads on CPU
