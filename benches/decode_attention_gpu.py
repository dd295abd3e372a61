"""GPU: the Triton decode attention against the memory bandwidth, and a sweep of its tunables.

Llama-3-8B's attention shapes (32 query heads, 8 KV heads, head dim 128, bf16), one layer, every
request holding `context` cached tokens. Per shape: the kernel's time with the serving defaults,
the KV bytes it must read (K and V of every cached token of every request), the GB/s that makes,
the time of a plain device copy of a tensor of as many bytes (`torch` copy: it reads and writes
them) and kernel / copy. Then a coordinate-descent sweep (`benchlib/decode_sweep.py`) over
BLOCK_N, num_warps, num_stages and the split count, the best configuration per shape, and one
tile for all shapes: what to set as `DecodeTuning`'s defaults. Every configuration's output is
checked against the loop-per-request reference (`sglr.kernels.reference`) on a few requests;
one that disagrees cannot win. Times: the median of `triton.testing.do_bench` (L2 flushed).

    python benches/decode_attention_gpu.py                      # H100 / H200: about 1-2 minutes
    python benches/decode_attention_gpu.py --sweep none         # the defaults' table only
    python benches/decode_attention_gpu.py --smoke --json out.json   # CPU, Triton interpreter
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib.decode_sweep import Axes, Config, Measured, common_tile, descend, fastest


@dataclass(frozen=True)
class Dims:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype


LLAMA3_8B = Dims(32, 8, 128, torch.bfloat16)
# The interpreter computes bf16 dots wrongly and slowly: fp32 and tiny shapes there.
SMOKE = Dims(4, 2, 16, torch.float32)
FULL_AXES = Axes(
    block_n=(32, 64, 128), num_warps=(2, 4, 8), num_stages=(1, 2, 3, 4), num_splits=(1, 2, 4, 8, 16, 32)
)
SMOKE_AXES = Axes(block_n=(32,), num_warps=(4,), num_stages=(None,), num_splits=(1, 4))
_REFERENCE_REQUESTS = 4


class Case:
    """One layer's KV pool holding `batch` requests of `context` tokens (consecutive slots per
    request, as a fresh pool hands them out), their queries and a table row each."""

    def __init__(self, dims: Dims, batch: int, context: int, device: torch.device, seed: int = 0) -> None:
        torch.manual_seed(seed)
        num_slots = batch * context + 1  # slot 0: padding, never read
        self.dims, self.batch, self.context = dims, batch, context
        shape = (num_slots, dims.num_kv_heads, dims.head_dim)
        self.k_cache = torch.empty(shape, dtype=dims.dtype, device=device).normal_()
        self.v_cache = torch.empty(shape, dtype=dims.dtype, device=device).normal_()
        self.table = (1 + torch.arange(batch * context, device=device, dtype=torch.int32)).view(
            batch, context
        )
        self.req_rows = torch.arange(batch, device=device, dtype=torch.int64)
        self.seq_lens = torch.full((batch,), context, device=device, dtype=torch.int64)
        self.q = torch.randn((batch, dims.num_heads, dims.head_dim), device=device).to(dims.dtype)
        self.scale = dims.head_dim**-0.5
        itemsize = torch.empty((), dtype=dims.dtype).element_size()
        self.kv_bytes = 2 * batch * context * dims.num_kv_heads * dims.head_dim * itemsize
        num = min(batch, _REFERENCE_REQUESTS)
        from sglr.kernels.reference import decode_attention_reference

        self.reference = decode_attention_reference(
            self.q[:num],
            self.k_cache,
            self.v_cache,
            self.table,
            list(range(num)),
            [context] * num,
            self.scale,
        ).float()

    def run(self, config: Config) -> torch.Tensor:
        from sglr.kernels.triton_decode import DecodeTuning, decode_attention

        tuning = DecodeTuning(
            block_n=config.block_n, num_warps=config.num_warps, num_stages=config.num_stages
        )
        return decode_attention(
            self.q, self.k_cache, self.v_cache, self.table, self.req_rows, self.seq_lens, self.scale,
            num_kv_splits=config.num_splits, tuning=tuning,
        )  # fmt: skip

    def error(self, out: torch.Tensor) -> float:
        return float((out[: self.reference.shape[0]].float() - self.reference).abs().max())


def seconds_of(fn, device: torch.device, rep_ms: int) -> float:
    if device.type == "cuda":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="median") / 1e3
    times = []
    for _ in range(2):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_seconds(num_bytes: int, device: torch.device, rep_ms: int) -> float:
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return seconds_of(lambda: dst.copy_(src), device, rep_ms)


def tolerance_of(case: Case, device: torch.device) -> float:
    """How far from the reference another configuration may be: twice the defaults' own error
    (tiles sum in other orders) plus one unit of the output dtype at the output's scale."""
    scale = float(case.reference.abs().max())
    return 2 * case.error(case.run(default_config(case, device))) + torch.finfo(case.dims.dtype).eps * scale


def default_config(case: Case, device: torch.device) -> Config:
    from sglr.kernels.triton_decode import DecodeTuning, num_kv_splits_for

    tuning = DecodeTuning()
    splits = num_kv_splits_for(case.batch, case.dims.num_kv_heads, device, tuning)
    return Config(tuning.block_n_for(case.dims.head_dim), tuning.num_warps, tuning.num_stages, splits)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", help="default 1,64,128,256 (smoke: 1,3)")
    parser.add_argument("--contexts", help="default 1024,4096 (smoke: 70)")
    parser.add_argument("--sweep", choices=("descent", "none"), default="descent")
    parser.add_argument("--rep-ms", type=int, default=40, help="do_bench's measuring time per configuration")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="stop sweeping after this long")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny fp32 shapes on the CPU (Triton interpreter)"
    )
    parser.add_argument("--json", help="also write every measurement here")
    args = parser.parse_args(argv)
    args.batch_sizes = args.batch_sizes or ("1,3" if args.smoke else "1,64,128,256")
    args.contexts = args.contexts or ("70" if args.smoke else "1024,4096")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any Triton kernel module is imported
    device = torch.device("cpu" if args.smoke else "cuda")
    dims, axes = (SMOKE, SMOKE_AXES) if args.smoke else (LLAMA3_8B, FULL_AXES)
    shapes = [(int(b), int(c)) for c in args.contexts.split(",") for b in args.batch_sizes.split(",")]
    began = time.perf_counter()
    print(f"decode attention: {dims.num_heads} q heads, {dims.num_kv_heads} KV heads, head dim {dims.head_dim}, "
          f"{str(dims.dtype).removeprefix('torch.')}; {torch.cuda.get_device_name(0) if device.type == 'cuda' else 'CPU interpreter'}")  # fmt: skip
    rows, sweeps = [], []
    header = "| batch | context | splits | kernel us | KV MB | GB/s | copy us | copy GB/s (r+w) | kernel / copy | max err |"
    print("\nServing defaults (DecodeTuning())\n\n" + header + "\n" + "|---:" * 10 + "|")
    cases = {}
    for batch, context in shapes:
        case = cases[(batch, context)] = Case(dims, batch, context, device)
        config = default_config(case, device)
        out = case.run(config)
        kernel = seconds_of(lambda case=case, config=config: case.run(config), device, args.rep_ms)
        copy = copy_seconds(case.kv_bytes, device, args.rep_ms)
        row = {
            "batch": batch, "context": context, "num_splits": config.num_splits, "kernel_s": kernel,
            "kv_bytes": case.kv_bytes, "gbps": case.kv_bytes / kernel / 1e9, "copy_s": copy,
            "copy_gbps": 2 * case.kv_bytes / copy / 1e9, "kernel_over_copy": kernel / copy,
            "max_abs_err": case.error(out), "ref_max_abs": float(case.reference.abs().max()),
        }  # fmt: skip
        rows.append(row)
        print(f"| {batch} | {context} | {config.num_splits} | {kernel * 1e6:,.1f} | {case.kv_bytes / 1e6:,.1f} | "
              f"{row['gbps']:,.0f} | {copy * 1e6:,.1f} | {row['copy_gbps']:,.0f} | {row['kernel_over_copy']:.2f} | "
              f"{row['max_abs_err']:.2e} |")  # fmt: skip
    if args.sweep == "descent":
        sweeps = sweep(cases, axes, device, args, began)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"defaults": rows, "sweep": sweeps}, f, indent=1)


def sweep(
    cases: dict[tuple[int, int], Case], axes: Axes, device: torch.device, args, began: float
) -> list[dict]:
    def out_of_time() -> bool:
        return time.perf_counter() - began > args.max_seconds

    per_shape: dict[tuple[int, int], list[Measured]] = {}
    tolerances = {key: tolerance_of(case, device) for key, case in cases.items()}

    def measure_on(key: tuple[int, int], config: Config) -> tuple[float, bool]:
        case = cases[key]
        try:
            ok = case.error(case.run(config)) <= tolerances[key]
        except Exception as exc:  # a tile Triton cannot build (e.g. out of shared memory)
            print(
                f"  batch {key[0]} context {key[1]}: {config.label()} failed: {type(exc).__name__}: {str(exc)[:120]}"
            )
            return float("inf"), False
        return seconds_of(lambda: case.run(config), device, args.rep_ms), ok

    for key, case in cases.items():
        per_shape[key] = descend(
            default_config(case, device), axes, lambda c, key=key: measure_on(key, c), out_of_time
        )
        if out_of_time():
            print(f"\n(sweep stopped after {args.max_seconds:.0f}s, at batch {key[0]} context {key[1]})")
            break
    # Every shape's winning tile on every other shape (at that shape's best split count), so one
    # tile for all is chosen from measurements on all.
    winners = {r.config.tile() for rs in per_shape.values() if (r := fastest(rs)) is not None}
    for key, results in per_shape.items():
        best = fastest(results)
        for block_n, num_warps, num_stages in sorted(winners - {r.config.tile() for r in results}, key=str):
            if best is None or out_of_time():
                break
            config = Config(block_n, num_warps, num_stages, best.config.num_splits)
            results.append(Measured(config, *measure_on(key, config)))
    report(cases, per_shape, device)
    return [
        {"batch": k[0], "context": k[1], **asdict(r.config), "seconds": r.seconds, "ok": r.ok}
        for k, rs in per_shape.items() for r in rs
    ]  # fmt: skip


def report(
    cases: dict[tuple[int, int], Case], per_shape: dict[tuple[int, int], list[Measured]], device
) -> None:
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    print("\nBest configuration per shape (coordinate descent from the defaults)\n")
    print("| batch | context | default us | best us | speedup | best GB/s | best | programs / SM | tried |")
    print("|---:" * 6 + "|---|---:|---:|")
    for key, results in per_shape.items():
        case, best = cases[key], fastest(results)
        default = next((r for r in results if r.config == default_config(case, device)), None)
        if best is None or default is None:
            print(
                f"| {key[0]} | {key[1]} | | | | | no configuration agreed with the reference | | {len(results)} |"
            )
            continue
        programs = key[0] * case.dims.num_kv_heads * best.config.num_splits / num_sms
        print(f"| {key[0]} | {key[1]} | {default.seconds * 1e6:,.1f} | {best.seconds * 1e6:,.1f} | "
              f"{default.seconds / best.seconds:.2f}x | {case.kv_bytes / best.seconds / 1e9:,.0f} | "
              f"{best.config.label()} | {programs:.1f} | {len(results)} |")  # fmt: skip
    common = common_tile(list(per_shape.values()))
    if common is not None:
        (block_n, num_warps, num_stages), slowdown = common
        print(f"\nOne tile for all shapes: DecodeTuning(block_n={block_n}, num_warps={num_warps}, "
              f"num_stages={num_stages}), geometric-mean slowdown {slowdown:.3f}x against each shape's best")  # fmt: skip


if __name__ == "__main__":
    main()
