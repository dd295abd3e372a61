"""`SGLR_CPU_DECODE_THREADS` caps the torch threads of CPU decode steps only, and restores them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig


def test_decode_steps_run_on_the_capped_thread_count(tiny_path, monkeypatch):
    runner = ModelRunner(RunnerConfig(tiny_path, device="cpu", kv_num_tokens=64, max_num_reqs=2))
    seen: list[int] = []
    runner.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    monkeypatch.setenv("SGLR_CPU_DECODE_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        empty = np.zeros(0, dtype=np.int64)
        runner.forward_extend([ExtendRequest(1, np.array([5, 6, 7]), empty, np.arange(1, 4))])
        runner.forward_decode([1], [8], [4], [4])
        assert seen == [2, 1]
        assert torch.get_num_threads() == 2
        monkeypatch.setenv("SGLR_CPU_DECODE_THREADS", "many")
        with pytest.raises(ValueError, match="SGLR_CPU_DECODE_THREADS"):
            runner.forward_decode([1], [9], [5], [5])
    finally:
        torch.set_num_threads(before)


def test_large_cpu_extend_batches_hand_freed_heap_back(tiny_path, monkeypatch):
    """After an extend batch of 512+ tokens (not smaller ones, not decode steps) the runner
    returns freed heap to the OS."""
    import sglr.model.runner as runner_module

    runner = ModelRunner(RunnerConfig(tiny_path, device="cpu", kv_num_tokens=2048, max_num_reqs=2))
    calls: list[int] = []
    monkeypatch.setattr(runner_module, "release_freed_heap", lambda: calls.append(1))
    empty = np.zeros(0, dtype=np.int64)
    runner.forward_extend([ExtendRequest(1, np.arange(3, 103), empty, np.arange(1, 101))])
    runner.forward_decode([1], [8], [101], [101])
    assert calls == []
    runner.forward_extend([ExtendRequest(2, np.arange(3, 603) % 200 + 3, empty, np.arange(201, 801))])
    assert calls == [1]
