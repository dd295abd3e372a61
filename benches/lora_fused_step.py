"""LoRA adapters in the fused CPU decode step on SmolLM2 (the default 4-bit GGUF model): decode
steps of a batch of `--batch` requests over `--adapters` random adapters (ranks 8 and 16 in
turn, on all seven projections), the base model's fused step against the mixed batch's fused
step (the adapters' deltas in Rust, `rust/kernels/src/decode/lora.rs`) and the mixed batch's
layered path (torch deltas over the layered 4-bit matmuls, what such batches ran before).

The requests are prefilled once (`--prompt-len` tokens, each with its adapter); then every
path runs `--steps` decode steps from the same position (overwriting the same KV slots, forced
tokens), timed on the runner alone (no scheduling, no sampling); each number is the best of
`--repeats` turns, the paths alternating.

    .venv/bin/python benches/lora_fused_step.py [--batch 32] [--adapters 8] [--steps 8] [--repeats 3]
        [--threads N (default: torch's)]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sglr.engine.engine import Engine
from sglr.model.forward_batch import ExtendRequest
from sglr.testing.tiny_lora import write_random_adapter

ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
EMPTY = np.zeros(0, dtype=np.int64)


def write_adapters(out: Path, count: int) -> tuple[list[str], list[int]]:
    """`count` adapters of SmolLM2 (ranks 8, 16, 8, ...): their `name=path` strings and ranks."""
    engine = Engine(None, device="cpu")
    try:
        config = engine.runner.config
    finally:
        engine.shutdown()
    paths, ranks = [], []
    for i in range(count):
        rank = 8 if i % 2 == 0 else 16
        path = write_random_adapter(config, out / f"a{i}", rank=rank, target_modules=ALL_PROJECTIONS, seed=i)
        paths.append(f"a{i}={path}")
        ranks.append(rank)
    return paths, ranks


class Steps:
    """Decode steps of `batch` prefilled requests (rows 1.., slots after each one's prompt)."""

    def __init__(self, runner, batch: int, prompt_len: int, lora_ids: np.ndarray) -> None:
        self.runner = runner
        self.rows = np.arange(1, batch + 1)
        self.starts = 1 + self.rows * (prompt_len + 64)  # each request's first slot
        self.prompt_len = prompt_len
        self.lora_ids = lora_ids
        rng = np.random.default_rng(0)
        for row, start, lora_id in zip(self.rows, self.starts, lora_ids, strict=True):
            prompt = rng.integers(3, 40_000, size=prompt_len)
            slots = np.arange(start, start + prompt_len)
            runner.forward_extend([ExtendRequest(int(row), prompt, EMPTY, slots, lora_id=int(lora_id))])
        self.tokens = rng.integers(3, 40_000, size=(64, batch))

    def run(self, steps: int, lora_ids: np.ndarray | None, fused: bool) -> float:
        """Seconds per step over `steps` steps (after one untimed warm-up step)."""
        runner = self.runner
        saved = runner.fused_decode
        runner.fused_decode = saved if fused else None
        try:
            elapsed = 0.0
            for step in range(steps + 1):
                seq_lens = np.full(len(self.rows), self.prompt_len + step + 1)
                slots = self.starts + self.prompt_len + step
                begin = time.perf_counter()
                runner.forward_decode(self.rows, self.tokens[step], seq_lens, slots, lora_ids=lora_ids)
                if step > 0:
                    elapsed += time.perf_counter() - begin
            return elapsed / steps
        finally:
            runner.fused_decode = saved


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name, default in {"batch": 32, "adapters": 8, "prompt-len": 128, "steps": 8, "repeats": 3}.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--threads", type=int, default=None, help="torch's and the fused step's threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # the fused step's pool takes torch's count
    with tempfile.TemporaryDirectory(prefix="sglr-lora-bench-") as tmp:
        lora_paths, ranks = write_adapters(Path(tmp), args.adapters)
        engine = Engine(None, device="cpu", lora_paths=lora_paths, max_loras_per_batch=args.adapters)
        try:
            runner = engine.runner
            if runner.fused_decode is None:
                raise SystemExit("the default model does not take the fused CPU decode step here")
            lora_ids = np.arange(args.batch) % args.adapters + 1  # interleaved: no adapter's rows adjacent
            steps = Steps(runner, args.batch, args.prompt_len, lora_ids)
            paths = {
                "base, fused": (None, True),
                "mixed, fused": (lora_ids, True),
                "mixed, layered": (lora_ids, False),
            }
            best = {name: float("inf") for name in paths}
            for _ in range(args.repeats):
                for name, (ids, fused) in paths.items():
                    best[name] = min(best[name], steps.run(args.steps, ids, fused))
            isa = runner.fused_decode._model.isa
        finally:
            engine.shutdown()
    print(
        f"SmolLM2 4-bit GGUF, batch {args.batch} over {args.adapters} adapters (ranks {sorted(set(ranks))}, "
        f"all seven projections), {args.prompt_len}-token prompts, {torch.get_num_threads()} threads, ISA {isa}; "
        f"best of {args.repeats} x {args.steps} steps"
    )
    print(f"| {'path':<16} | {'ms / step':>9} | {'tokens/s':>8} | {'vs base fused':>13} |")
    print(f"|{'-' * 18}|{'-' * 11}|{'-' * 10}|{'-' * 15}|")
    base = best["base, fused"]
    for name, seconds in best.items():
        print(
            f"| {name:<16} | {seconds * 1e3:>9.1f} | {args.batch / seconds:>8.1f} | {base / seconds:>12.2f}x |"
        )


if __name__ == "__main__":
    main()
