"""Speculative decoding on CPU: spec off vs NGRAM side by side, copy-heavy and free generation.

Workloads (`benchlib/speculative_prompts.py`, chat prompts built deterministically):
copy-heavy: quote a passage verbatim, JSON extraction from a paragraph without and with a
`json_schema` constraint (constrained requests do not draft), a multi-turn chat whose last answer
repeats an earlier turn, a small code edit (rename a variable, return the whole function);
free generation: open questions, a short story. Greedy, at batch 1 (the prompts one at a time)
and batch 16 (16 different prompts in one `generate` call).

Both engines (same weights) live in one process; for every (workload, batch) cell each one's
prefix cache is flushed and primed with the cell's prompts (one output token), so the timings are
of decoding; then spec off and NGRAM alternate `generate` calls over the same requests. Columns:
output tokens/s of each, their ratio, mean accepted length (accepted drafts per verify pass),
decode passes per output token and the time of a decode pass (from `get_stats` deltas: a verify
pass scores more rows), and greedy identity (requests whose output_ids equal spec off's).
A request whose outputs differ is listed with its first differing position and the logprob gap
between the two tokens there, scored by spec off after the shared prefix (a near-tie on the 4-bit
model, or a bug).

    python benches/speculative_cpu.py                 # SmolLM2-135M (the embedded default model)
    python benches/speculative_cpu.py --quick         # fewer prompts at batch 1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))

from benchlib.speculative_prompts import WORKLOADS, Prompt, build

SYSTEMS = {"off": {}, "NGRAM": {"speculative_algorithm": "NGRAM"}}


@dataclass
class Run:
    """One system's timed requests of one (workload, batch) cell."""

    seconds: float = 0.0
    output_ids: list[list[int]] = field(default_factory=list)
    num_decode_passes: int = 0
    num_verify_passes: int = 0
    num_accepted_draft_tokens: int = 0
    num_generated_tokens: int = 0

    def __add__(self, other: Run) -> Run:
        return Run(
            self.seconds + other.seconds,
            self.output_ids + other.output_ids,
            self.num_decode_passes + other.num_decode_passes,
            self.num_verify_passes + other.num_verify_passes,
            self.num_accepted_draft_tokens + other.num_accepted_draft_tokens,
            self.num_generated_tokens + other.num_generated_tokens,
        )

    @property
    def num_output_tokens(self) -> int:
        return sum(len(ids) for ids in self.output_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.num_output_tokens / self.seconds

    @property
    def ms_per_pass(self) -> float:
        return 1000 * self.seconds / max(self.num_decode_passes, 1)


@dataclass
class Cell:
    workload: str
    kind: str  # "copy" or "free"
    batch_size: int
    prompts: list[Prompt]
    runs: dict[str, Run] = field(default_factory=dict)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where the two token lists differ (a length difference counts); None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def mean_accepted_length(run: Run) -> float | None:
    return run.num_accepted_draft_tokens / run.num_verify_passes if run.num_verify_passes else None


def identity(cell: Cell) -> tuple[int, int]:
    """(requests whose NGRAM output_ids equal spec off's, requests)."""
    pairs = list(zip(cell.runs["off"].output_ids, cell.runs["NGRAM"].output_ids, strict=True))
    return sum(first_difference(a, b) is None for a, b in pairs), len(pairs)


def sampling_params(prompt: Prompt, max_new_tokens: int) -> dict:
    params = {"temperature": 0, "max_new_tokens": max_new_tokens}
    if prompt.json_schema is not None:
        params["json_schema"] = prompt.json_schema
    return params


def prime(engine, texts: list[str], params: list[dict]) -> None:
    """Empties the prefix cache, then caches the cell's prompts (one output token each)."""
    engine.flush_cache()
    engine.generate(texts, [{**p, "max_new_tokens": 1} for p in params])


def timed_call(engine, texts: list[str], params: list[dict], clock) -> Run:
    """One `generate` call over the requests (one of them at batch 1, all 16 at batch 16)."""
    before = engine.get_stats()
    start = clock()
    results = engine.generate(texts, params)
    seconds = clock() - start
    after = engine.get_stats()
    return Run(
        seconds,
        [r["output_ids"] for r in results],
        *(
            after[key] - before[key]
            for key in (
                "num_decode_passes",
                "num_verify_passes",
                "num_accepted_draft_tokens",
                "num_generated_tokens",
            )
        ),
    )


def run_cells(engines: dict, cells: list[Cell], args) -> None:
    """Spec off and NGRAM alternate call by call (a slow moment of a shared machine then falls on
    both alike); with --repeats, each call's fastest run counts."""
    tokenizer = engines["off"].tokenizer
    for cell in cells:
        texts = [tokenizer.apply_chat_template(p.messages) for p in cell.prompts]
        params = [sampling_params(p, args.max_new_tokens) for p in cell.prompts]
        for engine in engines.values():
            prime(engine, texts, params)
        cell.runs = {name: Run() for name in engines}
        for i in range(0, len(texts), cell.batch_size):
            fastest: dict[str, Run] = {}
            for _ in range(args.repeats):
                for name, engine in engines.items():
                    run = timed_call(
                        engine, texts[i : i + cell.batch_size], params[i : i + cell.batch_size], args.clock
                    )
                    if name not in fastest or run.seconds < fastest[name].seconds:
                        fastest[name] = run
            for name, run in fastest.items():
                cell.runs[name] += run
        for name, run in cell.runs.items():
            print(
                f"  {cell.workload:<22} batch {cell.batch_size:>2} {name:<6} {run.seconds:6.2f} s "
                f"{run.tokens_per_s:6.1f} tok/s  passes {run.num_decode_passes}  {run.ms_per_pass:5.1f} ms/pass",
                file=sys.stderr,
                flush=True,
            )


def choice_gap(engine, prompt_ids: list[int], prefix: list[int], chosen: tuple[int, int]) -> float:
    """Spec off's logprob of the first token of `chosen` minus the second's, both scored after
    the same context (the prompt and `prefix`, teacher-forced, without the constraint)."""
    results = engine.generate(
        input_ids=[prompt_ids + prefix + [token] for token in chosen],
        sampling_params={"temperature": 0, "max_new_tokens": 1},
        return_logprob=True,
        logprob_start_len=len(prompt_ids) + len(prefix) - 1,  # its first entry has no logprob
    )
    first, second = (r["meta_info"]["input_token_logprobs"][-1][0] for r in results)
    return first - second


def divergences(engines: dict, cells: list[Cell]) -> list[str]:
    """One line per request whose outputs differ: where, and how near a tie spec off saw there."""
    lines = []
    off_engine = engines["off"]
    for cell in cells:
        for index, prompt in enumerate(cell.prompts):
            off, ngram = cell.runs["off"].output_ids[index], cell.runs["NGRAM"].output_ids[index]
            position = first_difference(off, ngram)
            if position is None:
                continue
            gap = "n/a (one output ended first)"
            if position < min(len(off), len(ngram)):
                prompt_ids = off_engine.tokenizer.encode(
                    off_engine.tokenizer.apply_chat_template(prompt.messages)
                )
                chosen = (off[position], ngram[position])
                gap = (
                    f"{choice_gap(off_engine, prompt_ids, off[:position], chosen):.4f} "
                    f"(off {chosen[0]} {off_engine.tokenizer.decode([chosen[0]])!r} vs NGRAM "
                    f"{chosen[1]} {off_engine.tokenizer.decode([chosen[1]])!r})"
                )
            lines.append(
                f"- {cell.workload}, batch {cell.batch_size}, prompt {index}: first difference at output "
                f"token {position} of {len(off)}/{len(ngram)}; logprob(off's token) - logprob(NGRAM's) "
                f"after off's prefix, spec off: {gap}"
            )
    return lines


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def table(cells: list[Cell]) -> list[str]:
    lines = [
        "| workload | kind | batch | off tok/s | NGRAM tok/s | NGRAM/off | mean accepted length "
        "| passes/token off | passes/token NGRAM | ms/pass off | ms/pass NGRAM | greedy identity |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in cells:
        off, ngram = cell.runs["off"], cell.runs["NGRAM"]
        same, total = identity(cell)
        lines.append(
            f"| {cell.workload} | {cell.kind} | {cell.batch_size} | {off.tokens_per_s:.1f} | "
            f"{ngram.tokens_per_s:.1f} | {ngram.tokens_per_s / off.tokens_per_s:.2f}x | "
            f"{fmt(mean_accepted_length(ngram), '.2f')} | "
            f"{off.num_decode_passes / max(off.num_generated_tokens, 1):.3f} | "
            f"{ngram.num_decode_passes / max(ngram.num_generated_tokens, 1):.3f} | "
            f"{off.ms_per_pass:.1f} | {ngram.ms_per_pass:.1f} | {same}/{total} |"
        )
    return lines


def summary(cells: list[Cell]) -> list[str]:
    """Per (kind, batch): output tokens/s summed over the cells, NGRAM/off."""
    lines = [
        "",
        "| kind | batch | off tok/s | NGRAM tok/s | NGRAM/off | target |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.kind, cell.batch_size), []).append(cell)
    for (kind, batch_size), group in groups.items():
        rates = {}
        for name in SYSTEMS:
            runs = [c.runs[name] for c in group]
            rates[name] = sum(r.num_output_tokens for r in runs) / sum(r.seconds for r in runs)
        target = "2.00x" if (kind, batch_size) == ("copy", 1) else ("0.95x" if batch_size == 1 else "1.00x")
        lines.append(
            f"| {kind} | {batch_size} | {rates['off']:.1f} | {rates['NGRAM']:.1f} | "
            f"{rates['NGRAM'] / rates['off']:.2f}x | {target} |"
        )
    return lines


def make_cells(workloads: list[str], batch_sizes: list[int], num_prompts_batch1: int) -> list[Cell]:
    cells = []
    for workload in workloads:
        kind, _ = WORKLOADS[workload]
        for batch_size in batch_sizes:
            n = num_prompts_batch1 if batch_size == 1 else batch_size
            cells.append(Cell(workload, kind, batch_size, build(workload, n)))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (SmolLM2) or a model path")
    parser.add_argument("--quick", action="store_true", help="2 prompts per workload at batch 1 instead of 4")
    parser.add_argument("--batch-sizes", default="1,16", help="comma-separated batch sizes")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    parser.add_argument("--max-new-tokens", type=int, default=112)
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell, the fastest counts")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time; cpu: this process's CPU time, all threads (steadier on a shared machine)",
    )
    args = parser.parse_args()
    args.clock = time.perf_counter if args.clock == "wall" else time.process_time
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    cells = make_cells(list(filter(None, args.workloads.split(","))), batch_sizes, 2 if args.quick else 4)

    import torch

    from sglr.engine.engine import Engine

    model_path = None if args.model == "default" else args.model
    start = time.perf_counter()
    engines = {
        name: Engine(model_path=model_path, device="cpu", **options) for name, options in SYSTEMS.items()
    }
    try:
        warmup = engines["off"].tokenizer.apply_chat_template([{"role": "user", "content": "Say hello."}])
        for engine in engines.values():
            engine.generate([warmup] * 2, {"temperature": 0, "max_new_tokens": 16})
        print(f"torch threads {torch.get_num_threads()}; {len(cells)} cells", file=sys.stderr, flush=True)
        run_cells(engines, cells, args)
        differing = divergences(engines, cells)
    finally:
        for engine in engines.values():
            engine.shutdown()
    print("\n".join(table(cells) + summary(cells)))
    if differing:
        print("\nGreedy outputs that differ:\n" + "\n".join(differing))
    print(f"\ntotal {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
