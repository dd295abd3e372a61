"""The overlap schedule on the CPU: plain vs overlapped decode passes side by side, one process.

Cells: a decode batch of B requests (short distinct prompts, greedy, `ignore_eos`, N output
tokens) for B in --batches, and a JSON-constrained batch (a schema with long constant keys:
constraint work and jump-forward on the host). Both engines (same weights, same options but
`overlap_schedule`) run each cell in alternation, --rounds times, after one warm-up call each;
the prefix cache is flushed before every call, so both prefill the same prompts. Columns:
output tokens/s of each (median over rounds), the ratio overlap / plain, the time of a decode
step (busy seconds / decode passes, from `get_stats` deltas), rows a pass spent on a request
its previous token ended, and greedy identity (requests whose output_ids equal plain's).

    python benches/overlap_cpu.py                  # SmolLM2-135M (the embedded default model)
    python benches/overlap_cpu.py --model tiny     # the seeded tiny model (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))

SCHEMA = {
    "type": "object",
    "properties": {
        "customer_identification_number": {"type": "integer", "minimum": 0, "maximum": 9999},
        "preferred_communication_channel": {"type": "string", "enum": ["email", "telephone", "post"]},
        "has_accepted_terms_and_conditions": {"type": "boolean"},
        "shipping_address_first_line": {"type": "string", "maxLength": 24},
    },
    "required": [
        "customer_identification_number",
        "preferred_communication_channel",
        "has_accepted_terms_and_conditions",
        "shipping_address_first_line",
    ],
    "additionalProperties": False,
}


def cells(args, vocab_size: int) -> list[tuple[str, list[list[int]], dict]]:
    rng = random.Random(args.seed)
    out = []
    for batch in args.batches:
        prompts = [
            [rng.randrange(100, vocab_size - 1) for _ in range(rng.randrange(8, 24))] for _ in range(batch)
        ]
        out.append(
            (
                f"decode B={batch}",
                prompts,
                {"temperature": 0, "max_new_tokens": args.tokens, "ignore_eos": True},
            )
        )
    if args.json_batch:
        prompts = [[rng.randrange(100, vocab_size - 1) for _ in range(12)] for _ in range(args.json_batch)]
        params = {"temperature": 0, "max_new_tokens": 160, "json_schema": json.dumps(SCHEMA)}
        out.append((f"json B={args.json_batch}", prompts, params))
    return out


def timed(engine, prompts: list[list[int]], params: dict) -> tuple[float, int, dict, list[list[int]], dict]:
    engine.flush_cache()
    before = engine.get_stats()
    start = time.perf_counter()
    results = engine.generate(input_ids=prompts, sampling_params=params)
    seconds = time.perf_counter() - start
    after = engine.get_stats()
    delta = {
        key: after[key] - before[key]
        for key in ("busy_seconds", "num_decode_passes", "num_overlap_dropped_rows")
    }
    num_tokens = sum(len(r["output_ids"]) for r in results)
    return seconds, num_tokens, delta, [r["output_ids"] for r in results], after


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="default", help="'default' (SmolLM2), 'tiny', or a model path")
    parser.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument("--json-batch", type=int, default=8, help="JSON-constrained requests (0: skip)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()

    import torch

    from sglr.engine.engine import Engine

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model == "tiny":
        from sglr.testing.tiny import tiny_model_path

        model_path: str | None = str(tiny_model_path("llama"))
    else:
        model_path = None if args.model == "default" else args.model
    engines = {
        name: Engine(model_path=model_path, device="cpu", overlap_schedule=flag, max_running_requests=64)
        for name, flag in (("plain", False), ("overlap", True))
    }
    vocab_size = engines["plain"].tokenizer.vocab_size
    print(f"model {model_path or 'SmolLM2-135M (default)'}; torch threads {torch.get_num_threads()}; "
          f"{args.rounds} rounds, alternating, medians")  # fmt: skip
    header = "| cell | plain tok/s | overlap tok/s | overlap / plain | ms/step plain | ms/step overlap | dropped rows | identical |"
    print(header)
    print("|" + "---|" * 8)
    try:
        for name, prompts, params in cells(args, vocab_size):
            for engine in engines.values():  # warm-up: first calls pay one-time costs
                timed(engine, prompts[:2], {**params, "max_new_tokens": 4})
            tps: dict[str, list[float]] = {"plain": [], "overlap": []}
            step_ms: dict[str, list[float]] = {"plain": [], "overlap": []}
            dropped = 0
            outputs: dict[str, list[list[int]]] = {}
            for _ in range(args.rounds):
                for system, engine in engines.items():
                    seconds, num_tokens, delta, ids, _ = timed(engine, prompts, params)
                    tps[system].append(num_tokens / seconds)
                    step_ms[system].append(1000 * delta["busy_seconds"] / max(delta["num_decode_passes"], 1))
                    outputs[system] = ids
                    if system == "overlap":
                        dropped += delta["num_overlap_dropped_rows"]
            same = sum(a == b for a, b in zip(outputs["plain"], outputs["overlap"], strict=True))
            plain_tps, overlap_tps = (statistics.median(tps[s]) for s in ("plain", "overlap"))
            print(
                f"| {name} | {plain_tps:,.1f} | {overlap_tps:,.1f} | {overlap_tps / plain_tps:.3f} | "
                f"{statistics.median(step_ms['plain']):.2f} | {statistics.median(step_ms['overlap']):.2f} | "
                f"{dropped // args.rounds} | {same}/{len(prompts)} |"
            )
    finally:
        for engine in engines.values():
            engine.shutdown()


if __name__ == "__main__":
    main()
