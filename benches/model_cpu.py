"""CPU: sglr's model runner vs `transformers` on the same checkpoint, in one run.

Prefill and decode tokens/s at batch 1 and at batch 32. At batch 32 the requests are ragged
(prompt lengths and output lengths differ, as real traffic does): sglr packs the prompts
without padding and drops each request from the decode batch when it is done; transformers
gets the same requests as one left-padded `generate` call that runs until the longest
finishes. Decode throughput counts only the tokens the requests asked for ("useful" tokens).

Decode time = time(generate N tokens) - time(generate 1 token), for both systems, so prompt
processing is not counted twice. Each number is the best of `--repeats` runs. By default time
is the process's CPU time with one thread, which other jobs on a shared machine barely disturb;
`--clock wall --threads N` measures elapsed time instead.

    .venv/bin/python benches/model_cpu.py [--model tiny|default|PATH] [--arch llama] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from sglr.engine.offline import generate_token_ids as generate
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_lens: list[int]
    output_lens: list[int]


def workloads(seed: int) -> list[Workload]:
    rng = np.random.default_rng(seed)
    return [
        Workload("batch 1", [512], [128]),
        Workload(
            "batch 32 ragged",
            rng.integers(16, 512, size=32).tolist(),
            rng.integers(16, 128, size=32).tolist(),
        ),
    ]


def best_times(fns: list[Callable[[], object]], repeats: int, clock: Callable[[], float]) -> list[float]:
    """Best time of each function; the functions take turns so load drift hits all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = clock()
            fn()
            best[i] = min(best[i], clock() - start)
    return best


def hf_generate(model: torch.nn.Module, prompts: list[list[int]], max_new_tokens: int) -> None:
    """One left-padded batch; runs max_new_tokens steps for every row (eos disabled)."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    with torch.no_grad():
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--arch", default="llama", choices=["llama", "qwen2"])
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="run dtype of both systems (bfloat16 pays off on CPUs with native bf16, e.g. AVX512-BF16)",
    )
    parser.add_argument(
        "--model",
        default="tiny",
        help="'tiny' (the seeded tiny model of --arch), 'default' (SmolLM2-135M-Instruct) or a model path",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both systems (1: robust on a shared machine)",
    )
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: process CPU time (robust when other jobs share the cores; needs --threads 1); wall: elapsed",
    )
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu measures one thread's work; use --threads 1 or --clock wall")
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    from transformers import AutoModelForCausalLM

    if args.model == "tiny":
        path = tiny_model_path(args.arch)
    else:
        from sglr.model.default_model import resolve_model_path

        path = resolve_model_path(None if args.model == "default" else args.model)
    print(f"model: {path}")
    runner = ModelRunner(
        RunnerConfig(path, device="cpu", dtype=args.dtype, kv_num_tokens=65536, max_num_reqs=64)
    )
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype)).eval()
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    rng = np.random.default_rng(args.seed)
    rows = []
    for work in workloads(args.seed):
        prompts = [rng.integers(3, runner.vocab_size, size=n).tolist() for n in work.prompt_lens]
        max_out = max(work.output_lens)
        num_prompt = sum(work.prompt_lens)
        num_useful = sum(work.output_lens) - len(prompts)  # tokens after the first, per request

        # Warm up both (first calls pay one-time initialization).
        generate(runner, prompts[:2], 2)
        hf_generate(hf, prompts[:2], 2)

        ours_prefill, hf_prefill, ours_total, hf_total = best_times(
            [
                lambda p=prompts: generate(runner, p, 1),
                lambda p=prompts: hf_generate(hf, p, 1),
                lambda p=prompts, w=work: generate(runner, p, w.output_lens),
                lambda p=prompts, m=max_out: hf_generate(hf, p, m),
            ],
            args.repeats,
            clock,
        )
        rows.append((work.name, "prefill", num_prompt / ours_prefill, num_prompt / hf_prefill))
        rows.append(
            (
                work.name,
                "decode",
                num_useful / (ours_total - ours_prefill),
                num_useful / (hf_total - hf_prefill),
            )
        )

    cfg = runner.config
    model_label = f"tiny {args.arch}" if args.model == "tiny" else os.path.basename(str(path))
    print(
        f"\nmodel: {model_label} ({cfg.num_params / 1e6:.2f}M params, hidden {cfg.hidden_size}, "
        f"{cfg.num_hidden_layers} layers, vocab {cfg.vocab_size}); torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), {args.clock} clock, best of {args.repeats}"
    )
    print(f"{'workload':<18}{'phase':<9}{'sglr tok/s':>13}{'transformers tok/s':>21}{'ratio':>8}")
    for name, phase, ours, theirs in rows:
        print(f"{name:<18}{phase:<9}{ours:>13,.0f}{theirs:>21,.0f}{ours / theirs:>7.2f}x")


if __name__ == "__main__":
    main()
