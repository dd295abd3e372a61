"""GPU: decode and prefill throughput of the model runner at Llama-3-8B shapes, next to the
memory-bandwidth roofline and to `transformers` on the same device, in one run.

Weights are random (`load_format="dummy"`, bf16): throughput does not depend on their values.
Decode: B requests each with a `--context`-token prompt already prefilled, then `--steps`
decode steps (CUDA graphs when the backend supports them), greedy argmax copied to the host
every step as an engine would. Roofline: a decode step must read every weight once plus each
request's KV; at the measured copy bandwidth that bounds tokens/s at `B / (bytes / bandwidth)`.
Prefill: `--prefill-reqs` fresh prompts of `--prefill-len` tokens in one extend batch.
FP8: `--quantization fp8` and / or `--kv-cache-dtype fp8_e4m3` run the same shapes a second time
that way (dummy weights quantized at load) and print its decode tokens/s beside bf16's.

    python benches/model_gpu.py                       # Llama-3-8B shapes on CUDA
    python benches/model_gpu.py --quantization fp8 --no-hf   # bf16 vs fp8 weights, side by side
    python benches/model_gpu.py --preset tiny --device cpu --batch-sizes 1,4 --no-hf   # smoke run
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig

PRESETS = {
    "llama3-8b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "tiny": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 4096,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_bandwidth(device: torch.device, num_bytes: int = 2 << 30) -> float:
    """Achievable memory bandwidth (bytes/s) from a large device-to-device copy (read + write)."""
    if device.type == "cpu":
        num_bytes = 256 << 20
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    sync(device)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - start)
    del src, dst
    return 2 * num_bytes / best


class Slots:
    """A bump allocator over the runner's slot ids (each measurement starts from an empty pool)."""

    def __init__(self) -> None:
        self.next_slot = 1

    def take(self, n: int) -> np.ndarray:
        slots = np.arange(self.next_slot, self.next_slot + n, dtype=np.int32)
        self.next_slot += n
        return slots


def prefill(runner: ModelRunner, rows: list[int], prompt_len: int, slots: Slots, chunk_reqs: int) -> None:
    rng = np.random.default_rng(0)
    for start in range(0, len(rows), chunk_reqs):
        requests = [
            ExtendRequest(row, rng.integers(0, runner.vocab_size, prompt_len), np.zeros(0, np.int32), slots.take(prompt_len))
            for row in rows[start : start + chunk_reqs]
        ]  # fmt: skip
        runner.forward(runner.extend_batch(requests))
    sync(runner.device)


def bench_decode(runner: ModelRunner, batch_size: int, context: int, steps: int) -> float:
    """tokens/s of `steps` decode steps for `batch_size` requests after a `context` prefill."""
    rows = list(range(1, batch_size + 1))  # the runner writes whole rows from each batch
    slots = Slots()
    prefill(runner, rows, context, slots, chunk_reqs=max(1, 8192 // context))
    token_ids = np.zeros(batch_size, dtype=np.int64)
    seq_len = context
    warmup = 3
    for step in range(warmup + steps):
        if step == warmup:
            sync(runner.device)
            start = time.perf_counter()
        seq_len += 1
        batch = runner.decode_batch(rows, token_ids, [seq_len] * batch_size, slots.take(batch_size))
        logits = runner.forward(batch).next_token_logits
        token_ids = logits.argmax(dim=-1).cpu().numpy()  # the host needs the tokens every step
    return batch_size * steps / (time.perf_counter() - start)


def bench_prefill(runner: ModelRunner, num_reqs: int, prompt_len: int, repeats: int = 3) -> float:
    rows = list(range(1, num_reqs + 1))
    best = float("inf")
    for _ in range(repeats + 1):  # the first run compiles kernels
        start = time.perf_counter()
        prefill(runner, rows, prompt_len, Slots(), chunk_reqs=num_reqs)
        best = min(best, time.perf_counter() - start)
    return num_reqs * prompt_len / best


def hf_model(preset: dict, device: torch.device) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{k: v for k, v in preset.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    # Build directly in bf16 on the device (an fp32 8B model would need 32 GB first).
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default_dtype)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def hf_decode(
    model: torch.nn.Module, batch_size: int, context: int, steps: int, device: torch.device
) -> float:
    ids = torch.randint(0, model.config.vocab_size, (batch_size, context), device=device)

    def run(n: int) -> float:
        sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        sync(device)
        return time.perf_counter() - start

    run(2)
    return batch_size * (steps - 1) / (run(steps) - run(1))


def hf_prefill(model: torch.nn.Module, num_reqs: int, prompt_len: int, device: torch.device) -> float:
    ids = torch.randint(0, model.config.vocab_size, (num_reqs, prompt_len), device=device)
    best = float("inf")
    for _ in range(4):
        sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            model(ids, logits_to_keep=1)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return num_reqs * prompt_len / best


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="llama3-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backend", default="auto", choices=["auto", "triton", "flashinfer", "torch"])
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--hf-batch-sizes", default="1,16,64,256", help="subset run through transformers")
    parser.add_argument("--context", type=int, default=512, help="prompt tokens per request before decoding")
    parser.add_argument("--steps", type=int, default=32, help="timed decode steps")
    parser.add_argument("--prefill-len", type=int, default=1024)
    parser.add_argument("--prefill-reqs", type=int, default=8)
    parser.add_argument("--no-hf", action="store_true", help="skip the transformers baseline")
    parser.add_argument("--no-cuda-graph", action="store_true")
    parser.add_argument("--quantization", choices=["fp8"], default=None, help="also run with fp8 weights")
    parser.add_argument(
        "--kv-cache-dtype", choices=["auto", "fp8_e4m3"], default="auto", help="also run with an fp8 KV cache"
    )
    args = parser.parse_args()

    device = torch.device(args.device)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    max_bs = max(batch_sizes)
    preset = PRESETS[args.preset]
    max_context = max(args.context + args.steps + 8, args.prefill_len)
    num_slots = max(max_bs * (args.context + args.steps + 8), args.prefill_reqs * args.prefill_len) + 16
    model_dir = Path(tempfile.mkdtemp(prefix="sglr-bench-"))
    (model_dir / "config.json").write_text(json.dumps(preset))

    bandwidth = measure_bandwidth(device)

    def build(quantization: str | None, kv_cache_dtype: str) -> ModelRunner:
        return ModelRunner(
            RunnerConfig(
                model_dir,
                dtype="bfloat16",
                device=str(device),
                load_format="dummy",
                kv_num_tokens=num_slots,
                max_num_reqs=max(max_bs, args.prefill_reqs),
                max_context_len=max_context,
                attention_backend=args.backend if kv_cache_dtype == "auto" else "auto",
                cuda_graph_max_bs=0 if args.no_cuda_graph else max_bs,
                quantization=quantization,
                kv_cache_dtype=kv_cache_dtype,
            )
        )

    runner = build(None, "auto")
    config = runner.config
    weight_bytes = (
        config.num_params * 2 - config.vocab_size * config.hidden_size * 2
    )  # the embedding is gathered
    kv_bytes_per_token = runner.kv_cache.shape.bytes_per_token

    decode_rows = []
    for bs in batch_sizes:
        ours = bench_decode(runner, bs, args.context, args.steps)
        avg_context = args.context + args.steps / 2
        step_bytes = weight_bytes + bs * avg_context * kv_bytes_per_token
        decode_rows.append((bs, ours, bs * bandwidth / step_bytes))
    prefill_ours = bench_prefill(runner, args.prefill_reqs, args.prefill_len)
    backend_name = runner.attn.name
    graphs = runner.cuda_graphs is not None
    del runner
    release(device)
    fp8_label, fp8_decode, fp8_prefill = None, {}, None
    if args.quantization is not None or args.kv_cache_dtype != "auto":
        runner = build(args.quantization, args.kv_cache_dtype)
        fp8_label = (
            f"weights {args.quantization or 'bf16'}, KV {args.kv_cache_dtype}: backend {runner.attn.name}, "
            f"cuda graphs {'on' if runner.cuda_graphs is not None else 'off'}"
        )
        fp8_decode = {bs: bench_decode(runner, bs, args.context, args.steps) for bs in batch_sizes}
        fp8_prefill = bench_prefill(runner, args.prefill_reqs, args.prefill_len)
        del runner
        release(device)

    hf_decode_tps: dict[int, float] = {}
    prefill_hf = None
    if not args.no_hf:
        model = hf_model(preset, device)
        for bs in [int(b) for b in args.hf_batch_sizes.split(",")]:
            if bs in batch_sizes:
                hf_decode_tps[bs] = hf_decode(model, bs, args.context, args.steps, device)
        prefill_hf = hf_prefill(model, args.prefill_reqs, args.prefill_len, device)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"\n{args.preset} shapes ({config.num_params / 1e9:.2f}B params, bf16, dummy weights) on {name}; "
        f"backend {backend_name}, cuda graphs {'on' if graphs else 'off'}; measured copy bandwidth "
        f"{bandwidth / 1e9:,.0f} GB/s; context {args.context}, {args.steps} decode steps"
    )
    print(
        f"{'batch':>6}{'sglr tok/s':>13}{'roofline tok/s':>16}{'% roofline':>12}{'transformers tok/s':>20}{'ratio':>8}"
    )
    for bs, ours, roofline in decode_rows:
        theirs = hf_decode_tps.get(bs)
        hf_cols = f"{theirs:>20,.0f}{ours / theirs:>7.1f}x" if theirs else f"{'-':>20}{'-':>8}"
        print(f"{bs:>6}{ours:>13,.0f}{roofline:>16,.0f}{100 * ours / roofline:>11.0f}%{hf_cols}")
    if fp8_label is not None:
        print(f"\nfp8 run ({fp8_label}); decode tokens/s beside bf16's")
        print(f"{'batch':>6}{'bf16 tok/s':>13}{'fp8 tok/s':>13}{'fp8 / bf16':>12}")
        for bs, ours, _ in decode_rows:
            print(f"{bs:>6}{ours:>13,.0f}{fp8_decode[bs]:>13,.0f}{fp8_decode[bs] / ours:>11.2f}x")
        print(f"prefill: bf16 {prefill_ours:,.0f} tok/s, fp8 {fp8_prefill:,.0f} tok/s")
    hf_prefill_col = f"{prefill_hf:,.0f} tok/s ({prefill_ours / prefill_hf:.1f}x)" if prefill_hf else "-"
    print(
        f"prefill {args.prefill_reqs} x {args.prefill_len} tokens: sglr {prefill_ours:,.0f} tok/s, "
        f"transformers {hf_prefill_col}"
    )


if __name__ == "__main__":
    main()
