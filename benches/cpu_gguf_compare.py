"""The embedded GGUF model (SmolLM2-135M-Instruct, Q4_1) on the CPU, side by side in one run:
weight formats (dequantized bf16 vs 4-bit quantized), thread counts, and optionally the same
benchmark on another checkout of sglr (`--baseline-src`, e.g. the code before a change); the
4-bit model with decode steps layer by layer (`SGLR_CPU_FUSED_DECODE=0`) and in one Rust call
(the default, `sglr.model.cpu_fused_decode`); and llama.cpp's `llama-server` on the same GGUF file and the same
token ids when it is built (`scripts/build-llama-cpp`; skipped with a note otherwise). llama.cpp
runs with `--no-repack` (its repacked AMX path crashes on this CPU), one slot per concurrent
request, prompt caching off, and is timed by the same wall-clock formulas through its HTTP API.

Each system runs in its own process (so resident memory is its own) through the engine
(`generate_token_ids`: greedy, exactly N new tokens), and the systems take turns `--repeats`
times; each number is the best. Wall clock. Workloads: batch 1 (a 512-token prompt, 128 new
tokens: prefill tok/s, decode tok/s = 127 / (time(128) - time(1))) and 16 concurrent requests
(128-token prompts, 64 new tokens: output tok/s over the whole run). RSS: resident memory after
the run, and its peak.

    .venv/bin/python benches/cpu_gguf_compare.py [--threads 1 2] [--baseline-src /tmp/base/python]
        [--gguf other.gguf] [--fused-only]

`--gguf` runs every system on another GGUF file (a Q4_K_M one, say; the labels name its
formats); `--fused-only` keeps llama.cpp and sglr's default (quantized, fused decode) only.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "python")
LLAMA_CPP_BIN = (
    Path(os.environ.get("SGLR_LLAMA_CPP_DIR", Path.home() / ".cache" / "sglr" / "llama.cpp")) / "bin"
)
PROMPT_LEN, NEW_TOKENS = 512, 128
NUM_CONCURRENT, CONCURRENT_PROMPT_LEN, CONCURRENT_NEW_TOKENS = 16, 128, 64


def workload_prompts(vocab_size: int) -> tuple[list[int], list[list[int]]]:
    """The batch-1 prompt and the concurrent prompts: seeded random token ids, never specials."""
    import numpy as np

    rng = np.random.default_rng(0)
    long_prompt = rng.integers(3, vocab_size, size=PROMPT_LEN).tolist()
    batch = [rng.integers(3, vocab_size, size=CONCURRENT_PROMPT_LEN).tolist() for _ in range(NUM_CONCURRENT)]
    return long_prompt, batch


def _resident_mb(pid: int | str) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text().split("\n")
    return {
        line.split(":")[0]: int(line.split()[1]) / 1024
        for line in status
        if line.startswith(("VmRSS", "VmHWM"))
    }


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _results(prefill: float, total: float, concurrent: float, mem: dict[str, float]) -> dict:
    return {
        "prefill": PROMPT_LEN / prefill,
        "decode": (NEW_TOKENS - 1) / max(total - prefill, 1e-9),
        "concurrent": NUM_CONCURRENT * CONCURRENT_NEW_TOKENS / concurrent,
        "rss_mb": mem["VmRSS"],
        "peak_mb": mem["VmHWM"],
    }


def worker(spec: dict) -> dict:
    import torch

    os.environ.update(spec.get("env", {}))
    torch.set_num_threads(spec["threads"])
    if spec.get("decode_threads"):
        os.environ["SGLR_CPU_DECODE_THREADS"] = str(spec["decode_threads"])
    from sglr.engine.offline import generate_token_ids as generate
    from sglr.model.runner import ModelRunner, RunnerConfig

    kwargs = {"gguf_weights": spec["gguf_weights"]} if spec["gguf_weights"] else {}
    runner = ModelRunner(
        RunnerConfig(
            spec.get("model_path"),
            device="cpu",
            dtype=spec["dtype"],
            kv_num_tokens=16384,
            max_num_reqs=32,
            **kwargs,
        )
    )
    long_prompt, batch = workload_prompts(runner.vocab_size)
    generate(runner, [long_prompt[:32], batch[0][:32]], 2)  # warm-up
    prefill = _timed(lambda: generate(runner, [long_prompt], 1))
    total = _timed(lambda: generate(runner, [long_prompt], NEW_TOKENS))
    concurrent = _timed(lambda: generate(runner, batch, CONCURRENT_NEW_TOKENS))
    return _results(prefill, total, concurrent, _resident_mb("self"))


def _post(url: str, body: dict, timeout: float = 600.0) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def llama_cpp_system(threads: int, model_path: str | None) -> dict:
    """llama-server on the same GGUF: the same workloads and formulas over its HTTP API."""
    from sglr.model.default_model import default_gguf_path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    slot_len = PROMPT_LEN + NEW_TOKENS + 16
    command = [
        str(LLAMA_CPP_BIN / "llama-server"), "-m", str(model_path or default_gguf_path()),
        "--host", "127.0.0.1", "--port", str(port), "-t", str(threads), "-tb", str(threads),
        "--no-repack", "-np", str(NUM_CONCURRENT), "-c", str(slot_len * NUM_CONCURRENT),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"llama-server exited: {server.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama-server did not become healthy in 120 s")
            time.sleep(0.2)
        with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as response:
            vocab_size = json.loads(response.read())["data"][0]["meta"]["n_vocab"]
        long_prompt, batch = workload_prompts(vocab_size)

        def complete(prompt: list[int], new_tokens: int) -> None:
            out = _post(
                f"{base}/completion",
                {"prompt": prompt, "n_predict": new_tokens, "temperature": 0.0,
                 "ignore_eos": True, "cache_prompt": False},
            )  # fmt: skip
            if out["tokens_predicted"] != new_tokens:
                raise RuntimeError(f"llama-server predicted {out['tokens_predicted']} tokens")

        def run_concurrent() -> None:
            with ThreadPoolExecutor(NUM_CONCURRENT) as pool:
                list(pool.map(lambda p: complete(p, CONCURRENT_NEW_TOKENS), batch))

        complete(long_prompt[:32], 2)  # warm-up
        prefill = _timed(lambda: complete(long_prompt, 1))
        total = _timed(lambda: complete(long_prompt, NEW_TOKENS))
        concurrent = _timed(run_concurrent)
        return _results(prefill, total, concurrent, _resident_mb(server.pid))
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_system(src: str, spec: dict) -> dict:
    if spec.get("llama_cpp"):
        return llama_cpp_system(spec["threads"], spec.get("model_path"))
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{spec}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _format_names(gguf_path: str | None) -> str:
    """The file's matrix formats, most common first ("Q4_1+Q8_0")."""
    from collections import Counter

    from gguf import GGMLQuantizationType

    from sglr.model.default_model import default_gguf_path
    from sglr.model.gguf.tensor_types import gguf_tensor_types

    types = gguf_tensor_types(gguf_path or default_gguf_path()).values()
    counts = Counter(GGMLQuantizationType(t).name for t in types)
    return "+".join(name for name, _ in counts.most_common() if name not in ("F32", "F16", "BF16"))


def _spec(dtype: str, gguf_weights: str | None, threads: int) -> dict:
    return {"dtype": dtype, "gguf_weights": gguf_weights, "threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--baseline-src", default=None, help="another checkout's python/ dir (dequantized bf16)"
    )
    parser.add_argument("--no-llama-cpp", action="store_true", help="skip llama.cpp even if built")
    parser.add_argument("--gguf", default=None, help="a GGUF file to run instead of the embedded one")
    parser.add_argument("--fused-only", action="store_true", help="llama.cpp and the default path only")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    with_llama_cpp = not args.no_llama_cpp and (LLAMA_CPP_BIN / "llama-server").exists()
    if not with_llama_cpp and not args.no_llama_cpp:
        print(f"note: llama.cpp not built ({LLAMA_CPP_BIN}; scripts/build-llama-cpp): skipped")
    formats = _format_names(args.gguf)
    systems = []
    for threads in args.threads:
        if with_llama_cpp:
            llama_cpp = {"llama_cpp": True, "threads": threads}
            systems.append((f"llama.cpp {formats}, {threads}T", SRC, llama_cpp))
        if args.baseline_src:
            systems.append(
                (f"baseline bf16, {threads}T", args.baseline_src, _spec("bfloat16", None, threads))
            )
        if not args.fused_only:
            dequantized = _spec("bfloat16", "dequantized", threads)
            systems.append((f"bf16 dequantized, {threads}T", SRC, dequantized))
            layered = dict(_spec("bfloat16", "quantized", threads), env={"SGLR_CPU_FUSED_DECODE": "0"})
            systems.append((f"quantized, layered decode, {threads}T", SRC, layered))
        fused = _spec("bfloat16", "quantized", threads)
        systems.append((f"quantized ({formats}), fused decode, {threads}T", SRC, fused))
    for _, _, spec in systems:
        spec["model_path"] = args.gguf
    best: dict[str, dict] = {}
    for _ in range(args.repeats):
        for label, src, spec in systems:
            result = run_system(src, spec)
            kept = best.setdefault(label, result)
            for key in ("prefill", "decode", "concurrent"):
                kept[key] = max(kept[key], result[key])
            for key in ("rss_mb", "peak_mb"):
                kept[key] = min(kept[key], result[key])
    base_label = systems[0][0]
    base = best[base_label]
    print(f"wall clock, best of {args.repeats}; ratios vs '{base_label}'")
    print(
        "| system | prefill tok/s (b1, 512) | decode tok/s (b1) | 16 concurrent out tok/s | RSS MB | peak RSS MB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, _, _ in systems:
        r = best[label]
        cells = [f"{r[k]:.0f} ({r[k] / base[k]:.2f}x)" for k in ("prefill", "decode", "concurrent")]
        print(f"| {label} | {' | '.join(cells)} | {r['rss_mb']:.0f} | {r['peak_mb']:.0f} |")


if __name__ == "__main__":
    main()
