"""CPU decode of quantized GGUF models family by family: the fused Rust step (where the family's
layers allow it, `sglr.model.cpu_fused_decode`) against the layered path, on random models of
one shape written by `sglr.testing` (every matrix Q4_0), greedy tokens compared.

Per family: whether it takes the fused step (else why not), batch-1 decode tokens/s with the
layered path (`SGLR_CPU_FUSED_DECODE=0`) and with the default one, and whether both generate the
same greedy tokens. Decode tokens/s = (N - 1) / (time(N new tokens) - time(1 new token)) after a
`--prompt-len`-token prompt; each number is the best of `--repeats` turns, the paths alternating.

    .venv/bin/python benches/cpu_fused_families.py [--families llama qwen2 qwen3] [--threads 1]
        [--hidden-size 512 --num-layers 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sglr.engine.offline import generate_token_ids
from sglr.model.cpu_fused_decode import unsupported_reason
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import write_tiny_model
from sglr.testing.tiny_families import write_family_checkpoint
from sglr.testing.tiny_gguf import write_quantized_gguf


def write_checkpoint(family: str, out: Path, args: argparse.Namespace) -> Path:
    shape = {"hidden_size": args.hidden_size, "intermediate_size": 3 * args.hidden_size}
    heads = args.hidden_size // 64
    if family == "qwen3":
        return write_family_checkpoint(
            out, "qwen3", num_hidden_layers=args.num_layers, num_attention_heads=heads,
            num_key_value_heads=heads // 2, head_dim=64, **shape,
        )  # fmt: skip
    return write_tiny_model(
        out, family, num_layers=args.num_layers, num_heads=heads, num_kv_heads=heads // 2, **shape
    )


def runner_for(path: Path, fused: bool) -> ModelRunner:
    os.environ["SGLR_CPU_FUSED_DECODE"] = "1" if fused else "0"
    try:
        return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=4096, max_num_reqs=2))
    finally:
        del os.environ["SGLR_CPU_FUSED_DECODE"]


def decode_rate(runner: ModelRunner, prompt: list[int], num_new: int) -> tuple[float, list[int]]:
    start = time.perf_counter()
    generate_token_ids(runner, [prompt], 1)
    first = time.perf_counter() - start
    start = time.perf_counter()
    (tokens,) = generate_token_ids(runner, [prompt], num_new)
    return (num_new - 1) / (time.perf_counter() - start - first), tokens


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", nargs="+", default=["llama", "qwen2", "qwen3"])
    sizes = {
        "hidden-size": 512,
        "num-layers": 8,
        "prompt-len": 128,
        "num-new": 64,
        "threads": 1,
        "repeats": 3,
    }
    for name, default in sizes.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("sglr").setLevel(logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="sglr-fused-families-"))
    os.environ.setdefault("SGLR_CACHE_DIR", str(root / "cache"))
    prompt = np.random.default_rng(0).integers(3, 4000, size=args.prompt_len).tolist()
    rows = []
    for family in args.families:
        path = write_quantized_gguf(write_checkpoint(family, root / family, args), root / f"{family}.gguf")
        layered, default = runner_for(path, fused=False), runner_for(path, fused=True)
        reason = unsupported_reason(default.model, default.kv_cache)
        best = {"layered": 0.0, "default": 0.0}
        tokens = {}
        generate_token_ids(layered, [prompt], 2)  # warm-up: one-time packing and allocation
        generate_token_ids(default, [prompt], 2)
        for _ in range(args.repeats):
            for name, runner in (("layered", layered), ("default", default)):
                rate, tokens[name] = decode_rate(runner, prompt, args.num_new)
                best[name] = max(best[name], rate)
        rows.append(
            f"| {family} | {'yes' if reason is None else 'no: ' + reason} | {best['layered']:.0f} | "
            f"{best['default']:.0f} ({best['default'] / best['layered']:.2f}x) | "
            f"{'yes' if tokens['layered'] == tokens['default'] else 'no'} |"
        )
    print(
        f"hidden {args.hidden_size}, {args.num_layers} layers, head_dim 64, Q4_0; batch 1, "
        f"{args.prompt_len}-token prompt, {args.num_new} new tokens; {args.threads} thread(s), wall clock, "
        f"best of {args.repeats}"
    )
    print("| family | fused step | layered decode tok/s | default decode tok/s | same greedy tokens |")
    print("| --- | --- | ---: | ---: | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
