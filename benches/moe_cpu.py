"""CPU: a Mixtral-shaped mixture-of-experts model, sglr's model runner vs `transformers`, in one run.

The model is a `transformers`-written Mixtral with random weights (`sglr.testing.tiny_families`):
hidden 512, 8 experts, top-2, a few layers, the tiny tokenizer's 4096-token vocabulary. Prefill
and decode tokens/s at batch 1 and at batch 32 (ragged), measured as `benches/model_cpu.py`
does: sglr packs prompts without padding and drops finished requests; transformers runs one
left-padded `generate`; decode time = time(N tokens) - time(1 token); best of `--repeats`;
process CPU time with one thread unless `--clock wall --threads N`. `--ab` also times sglr with
its float32 experts in the torch loop over oneDNN-prepacked weights (`SGLR_CPU_MOE_KERNEL=0`,
the path before the rust expert kernel), in turns with the rest of the run.

    .venv/bin/python benches/moe_cpu.py [--quick] [--ab] [--layers 4] [--intermediate 1792] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from model_cpu import Workload, best_times, hf_generate
from sglr.engine.offline import generate_token_ids as generate
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny_families import write_family_checkpoint


def workloads(seed: int, quick: bool) -> list[Workload]:
    rng = np.random.default_rng(seed)
    if quick:
        return [
            Workload("batch 1", [128], [32]),
            Workload(
                "batch 32 ragged",
                rng.integers(16, 128, size=32).tolist(),
                rng.integers(8, 32, size=32).tolist(),
            ),
        ]
    return [
        Workload("batch 1", [512], [128]),
        Workload(
            "batch 32 ragged",
            rng.integers(16, 512, size=32).tolist(),
            rng.integers(16, 128, size=32).tolist(),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter prompts and outputs")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--intermediate", type=int, default=1792, help="of each expert")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="run dtype of both systems (bfloat16 pays off on CPUs with native bf16)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--ab", action="store_true", help="also time sglr's torch-loop experts")
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu measures one thread's work; use --threads 1 or --clock wall")
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    # The engine reads the tokenizer from the model directory at every `generate`: keep it to the end.
    tmp = tempfile.mkdtemp(prefix="sglr-moe-bench-")
    try:
        run(args, Path(tmp), clock)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def with_torch_experts(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` run with the rust expert kernel turned off (the environment is read at each call)."""

    def run() -> object:
        before = os.environ.get("SGLR_CPU_MOE_KERNEL")
        os.environ["SGLR_CPU_MOE_KERNEL"] = "0"
        try:
            return fn()
        finally:
            if before is None:
                del os.environ["SGLR_CPU_MOE_KERNEL"]
            else:
                os.environ["SGLR_CPU_MOE_KERNEL"] = before

    return run


def run(args: argparse.Namespace, tmp: Path, clock: Callable[[], float]) -> None:
    from transformers import AutoModelForCausalLM

    path = write_family_checkpoint(
        tmp / "mixtral",
        "mixtral",
        seed=args.seed,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 64,
        num_key_value_heads=max(1, args.hidden // 256),
        num_local_experts=args.experts,
        num_experts_per_tok=args.top_k,
    )
    runner = ModelRunner(
        RunnerConfig(path, device="cpu", dtype=args.dtype, kv_num_tokens=32768, max_num_reqs=64)
    )
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype)).eval()
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    rng = np.random.default_rng(args.seed)
    rows = []
    for work in workloads(args.seed, args.quick):
        prompts = [rng.integers(3, runner.vocab_size, size=n).tolist() for n in work.prompt_lens]
        max_out = max(work.output_lens)
        num_prompt = sum(work.prompt_lens)
        num_useful = sum(work.output_lens) - len(prompts)  # tokens after the first, per request
        generate(runner, prompts[:2], 2)  # warm-up: first calls pay one-time initialization
        hf_generate(hf, prompts[:2], 2)
        fns = [
            lambda p=prompts: generate(runner, p, 1),
            lambda p=prompts: hf_generate(hf, p, 1),
            lambda p=prompts, w=work: generate(runner, p, w.output_lens),
            lambda p=prompts, m=max_out: hf_generate(hf, p, m),
        ]
        if args.ab:
            with_torch_experts(lambda p=prompts: generate(runner, p[:2], 2))()  # its packs
            fns += [with_torch_experts(fns[0]), with_torch_experts(fns[2])]
        times = best_times(fns, args.repeats, clock)
        ours_prefill, hf_prefill, ours_total, hf_total = times[:4]
        loop_prefill, loop_total = times[4:] if args.ab else (float("nan"),) * 2
        rows.append(
            (
                work.name,
                "prefill",
                num_prompt / ours_prefill,
                num_prompt / hf_prefill,
                num_prompt / loop_prefill,
            )
        )
        rows.append(
            (
                work.name,
                "decode",
                num_useful / (ours_total - ours_prefill),
                num_useful / (hf_total - hf_prefill),
                num_useful / (loop_total - loop_prefill),
            )
        )

    cfg = runner.config
    moe = cfg.moe
    print(
        f"\nmodel: Mixtral-shaped ({cfg.num_params / 1e6:.1f}M params, hidden {cfg.hidden_size}, "
        f"{cfg.num_hidden_layers} layers, {moe.num_experts} experts top-{moe.num_experts_per_tok}, "
        f"expert intermediate {moe.expert_intermediate_size}, vocab {cfg.vocab_size}), {args.dtype}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.clock} clock, "
        f"best of {args.repeats}{' (quick)' if args.quick else ''}"
    )
    header = f"{'workload':<18}{'phase':<9}{'sglr tok/s':>13}{'transformers tok/s':>21}{'ratio':>8}"
    print(header + (f"{'torch-loop sglr tok/s':>24}{'ratio':>8}" if args.ab else ""))
    for name, phase, ours, theirs, loop in rows:
        line = f"{name:<18}{phase:<9}{ours:>13,.0f}{theirs:>21,.0f}{ours / theirs:>7.2f}x"
        print(line + (f"{loop:>24,.0f}{loop / theirs:>7.2f}x" if args.ab else ""))


if __name__ == "__main__":
    main()
