"""GPU: small extend batches eager vs replayed from extend CUDA graphs (`cuda_graph_extend_max_tokens`).

The shapes the graphs are for: jump-forward runs and speculative-style short extends (a few new
tokens on a long cached prefix), a chunked prompt's tail, a few short prompts. One runner at
`model_gpu.py` shapes (dummy bf16 weights, Triton attention) with extend graphs up to 64 tokens and
4 requests; per shape the same extend is run `--steps` times with the graphs and with them set
aside (eager), each step copying the argmax to the host as the engine does. Prints ms per step,
the speedup, and how far the graphed logits are from the eager ones (the graph pads the batch, so
GEMMs see more rows: small differences in bf16, equal greedy tokens expected).

    python benches/extend_graph_gpu.py                                  # Llama-3-8B shapes, CUDA
    python benches/extend_graph_gpu.py --preset tiny --device cpu --steps 2
        # CPU smoke: no graphs there, so the "graph" column runs the padded batch eagerly
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

from model_gpu import PRESETS, Slots, sync
from sglr.model.extend_padding import bucket_for, pad_extend, token_buckets
from sglr.model.forward_batch import ExtendRequest, ForwardBatch
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.model.runner_graphs import ModelSteps

# (requests, new tokens each, cached prefix each)
SHAPES = [(1, 4, 1024), (1, 16, 1024), (4, 8, 1024), (1, 48, 2048), (4, 16, 512), (2, 30, 256)]
MAX_TOKENS, MAX_REQS = 64, 4


def build(preset: dict, device: str, backend: str) -> ModelRunner:
    model_dir = Path(tempfile.mkdtemp(prefix="sglr-extend-graphs-"))
    (model_dir / "config.json").write_text(json.dumps(preset))
    kv_tokens = sum(r * (n + p) for r, n, p in SHAPES) + 64
    return ModelRunner(
        RunnerConfig(
            model_dir, dtype="bfloat16", device=device, load_format="dummy", kv_num_tokens=kv_tokens,
            max_num_reqs=16, max_context_len=4096, attention_backend=backend, cuda_graph_max_bs=0,
            cuda_graph_extend_max_tokens=MAX_TOKENS, cuda_graph_extend_max_reqs=MAX_REQS,
        )
    )  # fmt: skip


def shape_batch(
    runner: ModelRunner, first_row: int, shape: tuple[int, int, int], slots: Slots
) -> ForwardBatch:
    """Prefills the shape's prefixes (eagerly: they are long) and returns its extend batch."""
    num_reqs, new_len, prefix_len = shape
    rng = np.random.default_rng(first_row)
    prefixes, extends = [], []
    for row in range(first_row, first_row + num_reqs):
        prefix_slots, new_slots = slots.take(prefix_len), slots.take(new_len)
        ids = rng.integers(0, runner.vocab_size, prefix_len + new_len)
        prefixes.append(ExtendRequest(row, ids[:prefix_len], np.zeros(0, np.int32), prefix_slots))
        extends.append(ExtendRequest(row, ids[prefix_len:], prefix_slots, new_slots))
    graphs, runner.extend_graphs = runner.extend_graphs, None
    runner.forward(runner.extend_batch(prefixes))
    runner.extend_graphs = graphs
    return runner.extend_batch(extends)


def run_steps(
    runner: ModelRunner, batch: ForwardBatch, steps: int, padded: bool
) -> tuple[float, torch.Tensor]:
    """Seconds per step and the last step's logits. `padded` off CUDA: the padded batch eagerly
    (what a graph would replay), else `runner.forward` (graphs if the runner has them)."""
    model_steps = ModelSteps(runner.model, runner.attn)
    bucket = bucket_for(token_buckets(MAX_TOKENS), batch.num_tokens)

    def step() -> torch.Tensor:
        if not padded:
            return runner.forward(batch).next_token_logits
        pad = pad_extend(batch, bucket, MAX_REQS + 1)
        with torch.inference_mode():
            return model_steps.logits_at(pad.input_ids, pad.positions, pad.metadata(), pad.last_token_ids)[
                : batch.batch_size
            ]

    for _ in range(2):  # warm up (compiles kernels)
        step().argmax(dim=-1).cpu()
    sync(runner.device)
    start = time.perf_counter()
    for _ in range(steps):
        logits = step()
        logits.argmax(dim=-1).cpu()  # the host needs the tokens every step
    return (time.perf_counter() - start) / steps, logits.float().clone()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="llama3-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    runner = build(PRESETS[args.preset], args.device, args.backend)
    graphs = runner.extend_graphs
    on_cuda = runner.device.type == "cuda"
    if on_cuda and graphs is None:
        raise SystemExit(f"no extend graphs with the {args.backend!r} backend")
    label = "graph" if on_cuda else "padded (no graphs off CUDA)"
    print(f"{args.preset}, {runner.dtype}, {args.backend} attention, buckets {token_buckets(MAX_TOKENS)}, "
          f"up to {MAX_REQS} requests; {args.steps} steps each")  # fmt: skip
    print(
        f"\n| requests x new tokens | prefix | bucket | eager ms | {label} ms | speedup | max logit diff | same argmax |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    slots, first_row = Slots(), 1
    for shape in SHAPES:
        batch = shape_batch(runner, first_row, shape, slots)
        first_row += shape[0]
        runner.extend_graphs = None
        eager, eager_logits = run_steps(runner, batch, args.steps, padded=False)
        runner.extend_graphs = graphs
        graphed, graph_logits = run_steps(runner, batch, args.steps, padded=not on_cuda)
        diff = float((graph_logits - eager_logits).abs().max())
        same = bool(torch.equal(graph_logits.argmax(-1), eager_logits.argmax(-1)))
        num_reqs, new_len, prefix_len = shape
        print(f"| {num_reqs} x {new_len} | {prefix_len} | {bucket_for(token_buckets(MAX_TOKENS), batch.num_tokens)} | "
              f"{eager * 1e3:.2f} | {graphed * 1e3:.2f} | {eager / graphed:.2f}x | {diff:.3g} | {same} |")  # fmt: skip
        sync(runner.device)


if __name__ == "__main__":
    main()
