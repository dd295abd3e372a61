"""Engine throughput on shared-prefix workloads: radix cache on vs off, lpm vs fcfs vs random.

Workloads (token ids generated locally, seeded):
- few-shot: S subjects, each a shared prefix of P tokens, Q questions of 20-60 tokens each,
  a few output tokens; all requests arrive at once in shuffled order;
- multi-turn chat: C sessions x T turns behind one system prompt; each turn appends 40-100 user
  tokens to the session's history (with the previous answer) and generates an answer.

- JSON decoding: a whole-object JSON schema whose keys are long constants, jump-forward on vs
  off (forward passes, tokens/s); every output is validated against the schema.

Every system runs the same requests on its own engine (same weights) in one process, one
after the other. The table reports requests/s, output tokens/s, the measured cache hit rate and
the optimal one (from the requests' token trie), and the speedup over the no-cache baseline.

    python benches/engine_cpu.py                 # SmolLM2-135M (the embedded default model)
    python benches/engine_cpu.py --model tiny    # the seeded tiny model (seconds)
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))

from benchlib.hit_rate import optimal_hit_rate

SYSTEMS = {
    "sglr-lpm": {"schedule_policy": "lpm"},
    "cache-fcfs": {"schedule_policy": "fcfs"},
    "cache-random": {"schedule_policy": "random"},
    "no-cache": {"schedule_policy": "fcfs", "disable_radix_cache": True},
}
BASELINE = "no-cache"


@dataclass
class Row:
    workload: str
    system: str
    seconds: float
    num_requests: int
    num_output_tokens: int
    hit_rate: float
    optimal: float


def random_ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(100, vocab - 100) for _ in range(n)]


def few_shot(engine, args, vocab: int) -> tuple[list[tuple[list[int], list[int]]], int]:
    rng = random.Random(args.seed)
    prompts = []
    for _ in range(args.subjects):
        prefix = random_ids(rng, args.prefix_len, vocab)
        prompts += [prefix + random_ids(rng, rng.randrange(20, 60), vocab) for _ in range(args.questions)]
    rng.shuffle(prompts)
    params = {"max_new_tokens": args.few_shot_output, "temperature": 0, "ignore_eos": True}
    results = engine.generate(input_ids=prompts, sampling_params=params)
    pairs = [(p, r["output_ids"]) for p, r in zip(prompts, results, strict=True)]
    return pairs, sum(len(r["output_ids"]) for r in results)


def multi_turn(engine, args, vocab: int) -> tuple[list[tuple[list[int], list[int]]], int]:
    rng = random.Random(args.seed + 1)
    system = random_ids(rng, 200, vocab)
    histories = [list(system) for _ in range(args.sessions)]
    params = {"max_new_tokens": args.turn_output, "temperature": 0, "ignore_eos": True}
    pairs, num_output = [], 0
    for _turn in range(args.turns):
        prompts = [h + random_ids(rng, rng.randrange(40, 100), vocab) for h in histories]
        results = engine.generate(input_ids=prompts, sampling_params=params)
        for i, (prompt, result) in enumerate(zip(prompts, results, strict=True)):
            pairs.append((prompt, result["output_ids"]))
            histories[i] = prompt + result["output_ids"]
            num_output += len(result["output_ids"])
    return pairs, num_output


WORKLOADS = {"few-shot": few_shot, "multi-turn chat": multi_turn}

# The jump-forward showcase: most of each output is forced (keys, punctuation, enum tails).
LONG_KEY_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_identification_number": {"type": "integer", "minimum": 0, "maximum": 99999},
        "preferred_communication_channel": {"type": "string", "enum": ["electronic_mail", "telephone_call"]},
        "has_accepted_the_terms_and_conditions": {"type": "boolean"},
        "primary_shipping_address_city_name": {"type": "string", "maxLength": 16},
        "number_of_previous_orders_on_record": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": [
        "customer_identification_number",
        "preferred_communication_channel",
        "has_accepted_the_terms_and_conditions",
        "primary_shipping_address_city_name",
        "number_of_previous_orders_on_record",
    ],
    "additionalProperties": False,
}
JSON_SYSTEMS = {"jump-forward": {}, "no-jump-forward": {"disable_jump_forward": True}}


@dataclass
class JsonRow:
    system: str
    seconds: float
    num_requests: int
    num_output_tokens: int
    num_forward_passes: int
    num_jump_forward_tokens: int


def json_decode(name: str, options: dict, args) -> JsonRow:
    """Concurrent JSON-constrained requests (sampled, seeded) on one engine."""
    import json

    import jsonschema

    from sglr.engine.engine import Engine

    engine = Engine(model_path=args.model_path, device="cpu", max_total_tokens=args.kv_tokens, **options)
    try:
        schema = json.dumps(LONG_KEY_SCHEMA)
        cities = ["Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Rome", "Accra"]
        prompts = [
            f"Customer {i} lives in {cities[i % len(cities)]} and prefers email. Record as JSON:\n"
            for i in range(args.json_requests)
        ]
        params = [
            {"json_schema": schema, "temperature": 0.7, "seed": i, "max_new_tokens": 256}
            for i in range(args.json_requests)
        ]
        engine.generate(prompts[0], params[0])  # compiles the schema (cached) outside the timing
        before = engine.get_stats()
        start = args.clock()
        results = engine.generate(prompts, params)
        seconds = args.clock() - start
        after = engine.get_stats()
        for result in results:
            jsonschema.validate(json.loads(result["text"]), LONG_KEY_SCHEMA)
        row = JsonRow(
            name,
            seconds,
            len(results),
            sum(len(r["output_ids"]) for r in results),
            after["num_forward_passes"] - before["num_forward_passes"],
            after["num_jump_forward_tokens"] - before["num_jump_forward_tokens"],
        )
        print(f"  json-decode      {name:<22} {seconds:7.2f} s  passes {row.num_forward_passes}", flush=True)
        return row
    finally:
        engine.shutdown()


def print_json_table(rows: list[JsonRow]) -> None:
    base = next((r for r in rows if r.system == "no-jump-forward"), None)
    print()
    print(
        "| JSON decode | requests/s | output tok/s | forward passes | jump-forward tokens | speedup | fewer passes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        speedup = f"{base.seconds / row.seconds:.2f}x" if base else "n/a"
        fewer = f"{base.num_forward_passes / max(row.num_forward_passes, 1):.2f}x" if base else "n/a"
        print(
            f"| {row.system} | {row.num_requests / row.seconds:.2f} | {row.num_output_tokens / row.seconds:.1f} | "
            f"{row.num_forward_passes} | {row.num_jump_forward_tokens} | {speedup} | {fewer} |"
        )


def run_system(name: str, options: dict, args) -> list[Row]:
    from sglr.engine.engine import Engine

    model_path = args.model_path
    engine = Engine(
        model_path=model_path,
        device="cpu",
        max_total_tokens=args.kv_tokens,
        max_running_requests=args.max_running,
        seed=args.seed,
        **options,
    )
    rows = []
    try:
        vocab = engine.runner.vocab_size
        # Warm-up (first-call allocations and kernel selection stay out of the timings).
        engine.generate(input_ids=[[1000 + i for i in range(64)]] * 2, sampling_params={"max_new_tokens": 4})
        for workload, run in WORKLOADS.items():
            engine.flush_cache()
            before = engine.get_stats()
            start = args.clock()
            pairs, num_output = run(engine, args, vocab)
            seconds = args.clock() - start
            after = engine.get_stats()
            prompt = after["num_prompt_tokens"] - before["num_prompt_tokens"]
            cached = after["num_cached_prompt_tokens"] - before["num_cached_prompt_tokens"]
            rows.append(
                Row(
                    workload,
                    name,
                    seconds,
                    len(pairs),
                    num_output,
                    cached / max(prompt, 1),
                    optimal_hit_rate(pairs),
                )
            )
            print(f"  {workload:<16} {name:<22} {seconds:7.2f} s  hit {rows[-1].hit_rate:.1%}", flush=True)
    finally:
        engine.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (SmolLM2), 'tiny', or a model path")
    parser.add_argument("--kv-tokens", type=int, default=12_000, help="KV cache size (tokens)")
    parser.add_argument("--max-running", type=int, default=32)
    parser.add_argument("--subjects", type=int, default=4)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--prefix-len", type=int, default=1024)
    parser.add_argument("--few-shot-output", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-output", type=int, default=16)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of the systems")
    parser.add_argument("--json-requests", type=int, default=16, help="JSON-decode requests (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time; cpu: this process's CPU time (steadier on a shared machine)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    args.clock = time.perf_counter if args.clock == "wall" else time.process_time
    if args.model == "tiny":
        from sglr.testing.tiny import tiny_model_path

        args.model_path = str(tiny_model_path("llama"))
    else:
        args.model_path = None if args.model == "default" else args.model

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"model: {args.model}; torch threads: {torch.get_num_threads()}; KV cache {args.kv_tokens} tokens")
    rows: list[Row] = []
    for name in filter(None, args.systems.split(",")):  # --systems "" runs only the JSON part
        rows += run_system(name, SYSTEMS[name], args)
    json_rows = [
        json_decode(name, options, args) for name, options in JSON_SYSTEMS.items() if args.json_requests
    ]
    if rows:
        print_table(rows)
    if json_rows:
        print_json_table(json_rows)


def print_table(rows: list[Row]) -> None:
    print()
    print(
        "| workload | system | requests/s | output tok/s | hit rate | optimal | % of optimal | speedup vs no cache |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        base = next((r for r in rows if r.workload == row.workload and r.system == BASELINE), None)
        speedup = f"{base.seconds / row.seconds:.2f}x" if base else "n/a"
        share = row.hit_rate / row.optimal if row.optimal else 0.0
        print(
            f"| {row.workload} | {row.system} | {row.num_requests / row.seconds:.2f} | "
            f"{row.num_output_tokens / row.seconds:.1f} | {row.hit_rate:.1%} | {row.optimal:.1%} | {share:.1%} | {speedup} |"
        )


if __name__ == "__main__":
    main()
