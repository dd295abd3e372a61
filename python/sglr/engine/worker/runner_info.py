"""`RunnerInfo`: what the front process knows of a model runner that lives in a worker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class RunnerInfo:
    """The runner attributes the engine's front reads (the same names as `ModelRunner`'s)."""

    model_dir: Path
    num_kv_slots: int
    vocab_size: int
    max_context_len: int
    device: torch.device
    runner_config: Any  # the rank-0 runner's RunnerConfig
    weights_format: str = "dequantized"  # "quantized": a GGUF's 4-bit matrices kept 4-bit

    @classmethod
    def of(cls, runner: Any) -> RunnerInfo:
        return cls(
            model_dir=runner.model_dir,
            num_kv_slots=runner.num_kv_slots,
            vocab_size=runner.vocab_size,
            max_context_len=runner.max_context_len,
            device=runner.device,
            runner_config=runner.runner_config,
            weights_format=runner.weights_format,
        )
