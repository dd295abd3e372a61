"""GPU: where a decode step's time goes, at `benches/model_gpu.py` shapes (dummy bf16 weights).

For each batch size: the step time eager and with CUDA graphs, then a torch.profiler table of
the eager step's CUDA kernels (top entries by total device time) and the share of the step the
device is busy. Guides the decode work toward the roofline `model_gpu.py` prints.

    python benches/gpu_decode_profile.py --batch-sizes 1,64
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from model_gpu import PRESETS, Slots, prefill, sync
from sglr.model.runner import ModelRunner, RunnerConfig


def decode_steps(runner: ModelRunner, rows: list[int], seq_len: int, slots: Slots, steps: int) -> float:
    """Mean seconds per decode step (argmax copied to the host each step, as the engine does)."""
    token_ids = np.zeros(len(rows), dtype=np.int64)
    sync(runner.device)
    start = time.perf_counter()
    for _ in range(steps):
        seq_len += 1
        batch = runner.decode_batch(rows, token_ids, [seq_len] * len(rows), slots.take(len(rows)))
        token_ids = runner.forward(batch).next_token_logits.argmax(dim=-1).cpu().numpy()
    sync(runner.device)
    return (time.perf_counter() - start) / steps


def build(preset: dict, max_bs: int, context: int, backend: str, device: str) -> ModelRunner:
    model_dir = Path(tempfile.mkdtemp(prefix="sglr-profile-"))
    (model_dir / "config.json").write_text(json.dumps(preset))
    return ModelRunner(
        RunnerConfig(
            model_dir, dtype="bfloat16", device=device, load_format="dummy",
            kv_num_tokens=max_bs * (context + 64) + 16, max_num_reqs=max_bs,
            max_context_len=context + 64, attention_backend=backend,
            cuda_graph_max_bs=max_bs,
        )
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="llama3-8b")
    parser.add_argument("--batch-sizes", default="1,64")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run (no CUDA kernels to list)")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    runner = build(PRESETS[args.preset], max(batch_sizes), args.context, args.backend, args.device)
    graphs = runner.cuda_graphs
    for bs in batch_sizes:
        rows = list(range(1, bs + 1))
        slots = Slots()
        prefill(runner, rows, args.context, slots, chunk_reqs=max(1, 8192 // args.context))
        decode_steps(runner, rows, args.context, slots, 3)
        graphed = decode_steps(runner, rows, args.context + 3, slots, 20)
        runner.cuda_graphs = None
        eager = decode_steps(runner, rows, args.context + 23, slots, 20)
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            step = decode_steps(runner, rows, args.context + 43, slots, 5)
        runner.cuda_graphs = graphs
        events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        device_us = sum(e.self_device_time_total for e in events) / 5
        print(
            f"\nbatch {bs}: step {graphed * 1e3:.2f} ms with CUDA graphs, {eager * 1e3:.2f} ms eager "
            f"({step * 1e3:.2f} ms under the profiler); device busy {device_us / 1e3:.2f} ms per step"
        )
        events.sort(key=lambda e: e.self_device_time_total, reverse=True)
        print(f"  {'kernel':<70} {'us/step':>9} {'calls/step':>10}")
        for event in events[: args.top]:
            name = event.key if len(event.key) <= 70 else event.key[:67] + "..."
            print(f"  {name:<70} {event.self_device_time_total / 5:>9.1f} {event.count / 5:>10.1f}")


if __name__ == "__main__":
    main()
