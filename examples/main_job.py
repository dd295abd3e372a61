"""The main job (`scripts/setup-and-run`): LM programs from this directory on one engine, by
default the embedded SmolLM2-135M-Instruct, offline. The engine's scheduler and model run in a
worker process (this process tokenizes, assembles results and runs the programs), as
`sglr-server` runs them; `--in-process` keeps everything in this process.

It runs a multi-turn chat, a fork/join program, multiple choice with `select`, a JSON
schema-constrained extraction, an EBNF grammar-constrained expression, a passage quoted back under
speculative decoding, a batch over two LoRA adapters and the base, and a long document's KV
read back from the disk tier after a restart, prints each result, then the
engine's prefix-cache hit rate and generation speed. Last, it starts `sglr-server` on the same model (HTTP front, scheduler in a
worker process) and runs a tool-calling program through its OpenAI API (`--no-server` skips it).

    python examples/main_job.py [--model-path PATH] [--device cpu|cuda] [--in-process] [--no-server]
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import lang_backends

PROGRAMS = [
    ("multi-turn chat", "multi_turn_chat"),
    ("fork/join: one question per branch, answers joined", "parallel_questions"),
    ("select: multiple choice by token logprobs", "multiple_choice"),
    ("JSON schema: constrained extraction", "json_extraction"),
    ("EBNF grammar: a recursive arithmetic expression, evaluated", "arithmetic_grammar"),
    (
        "speculative decoding: a passage quoted back, drafts copied from the prompt (NGRAM)",
        "speculative_quote",
    ),
    ("LoRA: two adapters loaded at run time, one batch with the base model", "lora_adapters"),
    ("KV tier on disk: a long document's KV found again after a restart", "kv_tier_restart"),
]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--in-process", action="store_true", help="no worker process: everything here")
    parser.add_argument("--no-server", action="store_true", help="skip the sglr-server part")
    args = parser.parse_args(argv)
    example_argv = ["--backend", "engine", "--device", args.device]
    if args.model_path is not None:
        example_argv += ["--model-path", args.model_path]

    started = time.perf_counter()
    engine = lang_backends.shared_engine(args.model_path, args.device, multiprocess=not args.in_process)
    layout = f"worker process {engine.worker_pids[0]}" if engine.worker_pids else "this process"
    print(
        f"model: {engine.model_path} on {engine.runner.device}, scheduler and model in {layout} "
        f"(ready in {time.perf_counter() - started:.1f} s)"
    )
    programs_started = time.perf_counter()
    failures, results = [], {}
    for title, module_name in PROGRAMS:
        print(f"\n== {title} (examples/{module_name}.py) ==", flush=True)
        program_started = time.perf_counter()
        try:
            results[module_name] = importlib.import_module(module_name).main(example_argv)
        except Exception as exc:  # report and go on: the other programs still show their results
            failures.append(module_name)
            print(f"FAILED: {type(exc).__name__}: {exc}")
        print(f"   [{time.perf_counter() - program_started:.1f} s]", flush=True)
    programs_seconds = time.perf_counter() - programs_started

    stats = engine.get_stats()
    summary = {
        "programs_seconds": programs_seconds,
        "cache_hit_rate": stats["cache_hit_rate"],
        "generation_tokens_per_s": stats["generation_tokens_per_s"],
        "num_generated_tokens": stats["num_generated_tokens"],
        "num_failed_programs": len(failures),
        "results": results,
    }
    print("\n== engine ==")
    print(f"{len(PROGRAMS)} programs, {stats['num_requests']} generation calls in {programs_seconds:.1f} s")
    print(
        f"prompt tokens: {stats['num_prompt_tokens']}, {stats['num_cached_prompt_tokens']} of them from the "
        f"prefix cache: cache hit rate {stats['cache_hit_rate']:.1%}"
    )
    print(
        f"generated tokens: {stats['num_generated_tokens']} at {stats['generation_tokens_per_s']:.1f} tokens/s "
        f"(engine busy time; {stats['num_generated_tokens'] / programs_seconds:.1f} tokens/s over the whole run), "
        f"mean decode batch {stats['mean_decode_batch_size']:.1f}"
    )
    lang_backends.close_engines()
    if not args.no_server:
        print(
            "\n== sglr-server: tool calling through the OpenAI API (examples/tool_calling.py) ==", flush=True
        )
        try:
            results["tool_calling"] = run_on_server(args, "tool_calling")
        except Exception as exc:
            failures.append("tool_calling")
            print(f"FAILED: {type(exc).__name__}: {exc}")
        summary["num_failed_programs"] = len(failures)
    if failures:
        print(f"failed programs: {', '.join(failures)}")
    return summary


def run_on_server(args: argparse.Namespace, module_name: str) -> Any:
    """Starts sglr-server on the model, runs the example against its OpenAI API, stops it."""
    started = time.perf_counter()
    argv = [sys.executable, "-m", "sglr", "--port", "0", "--log-level", "warning", "--device", args.device]
    if args.model_path is not None:
        argv += ["--model-path", args.model_path]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = next(
            (m.group(1) for line in server.stdout if (m := re.search(r"serving .* on (http://\S+)", line))),
            None,
        )
        if url is None:
            raise RuntimeError(f"sglr-server exited with status {server.wait()} before serving")
        print(f"sglr-server at {url} (ready in {time.perf_counter() - started:.1f} s)", flush=True)
        example_argv = ["--backend", "openai", "--base-url", f"{url}/v1", "--model", "default"]
        return importlib.import_module(module_name).main(example_argv)
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(1 if main()["num_failed_programs"] else 0)
