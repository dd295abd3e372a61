"""CPU matmul kernels for a small model's decode: dense (bf16/fp32, plain or oneDNN-prepacked)
vs torch's weight-only quantized ones (int8 per-channel, int4 groupwise), on SmolLM2-135M's
shapes, in one run.

Per kernel: the time of one decode step's 121 matmuls over distinct weights (30 layers x
(qkv, o, gate_up, down) + the LM head), streamed from memory as the model does, and the
microseconds per call of one cache-hot weight per shape. With one thread the
clock is the process's CPU time, which other jobs on a shared machine barely disturb.

    .venv/bin/python benches/cpu_quant_kernels.py [--threads 1] [--rows 1 16]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

# (name, out_features, in_features, count per decode step) for SmolLM2-135M (hidden 576,
# 9 query / 3 KV heads of 64, MLP 1536, vocab 49152, 30 layers).
SHAPES = (
    ("qkv", 960, 576, 30),
    ("o", 576, 576, 30),
    ("gate_up", 3072, 576, 30),
    ("down", 576, 1536, 30),
    ("lm_head", 49152, 576, 1),
)
GROUP_SIZE = 32


def make_kernel(
    kind: str, weight: torch.Tensor
) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.dtype]:
    """(function of x, dtype of x) computing `x @ weight.T` for one fp32 weight `[N, K]`."""
    n, k = weight.shape
    if kind == "fp32 F.linear":
        return (lambda x: F.linear(x, weight), torch.float32)
    if kind == "bf16 F.linear":
        w16 = weight.to(torch.bfloat16)
        return (lambda x: F.linear(x, w16), torch.bfloat16)
    if kind in ("fp32 oneDNN packed", "bf16 oneDNN packed"):
        dtype = torch.float32 if kind.startswith("fp32") else torch.bfloat16
        pack = torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype), 32)
        return (lambda x: torch.ops.mkldnn._linear_pointwise(x, pack, None, "none", [], ""), dtype)
    dtype = torch.bfloat16 if kind.endswith("bf16") else torch.float32
    if kind.startswith("int8"):
        scale = weight.abs().amax(1).clamp(min=1e-8) / 127
        w8 = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        s = scale.to(dtype)
        return (lambda x: torch.ops.aten._weight_int8pack_mm(x, w8, s), dtype)
    groups = weight.view(n, k // GROUP_SIZE, GROUP_SIZE)
    lo, hi = groups.amin(-1), groups.amax(-1)
    d = ((hi - lo) / 15).clamp(min=1e-8)
    q4 = torch.round((groups - lo[..., None]) / d[..., None]).clamp(0, 15).view(n, k).to(torch.int32)
    packed4 = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q4, 1)
    scale_zero = torch.stack([d.T, (lo + 8 * d).T], dim=-1).contiguous().to(dtype)  # [K/G, N, 2]
    return (lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed4, GROUP_SIZE, scale_zero), dtype)


KINDS = (
    "fp32 F.linear",
    "bf16 F.linear",
    "fp32 oneDNN packed",
    "bf16 oneDNN packed",
    "int8/ch x bf16",
    "int4/g32 x bf16",
)
# The fp32-activation forms of the int8/int4 ops have no vectorized CPU path (measured 12-25x
# slower than bf16 at one row); they are left out of the step table.


def time_call(fn: Callable[[], object], repeats: int, clock: Callable[[], float]) -> float:
    """Seconds per call: best of `repeats` batches sized to ~20 ms."""
    fn()
    start = clock()
    fn()
    once = max(clock() - start, 1e-6)
    calls = max(1, int(0.02 / once))
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 16], help="batch rows (tokens) per call")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    torch.manual_seed(0)
    # One fp32 weight per layer and shape, as the model holds them: a step streams them all from
    # memory (one shared weight per shape would stay in cache and hide the memory traffic).
    weights = [(name, torch.randn(n, k) * 0.02) for name, n, k, count in SHAPES for _ in range(count)]
    steps: dict[tuple[int, str], float] = {}
    hot: dict[tuple[int, str, str], float] = {}
    with torch.inference_mode():
        for kind in KINDS:
            fns = [(name, *make_kernel(kind, w)) for name, w in weights]
            for rows in args.rows:
                xs = {k: torch.randn(rows, k).to(fns[0][2]) for _, _, k, _ in SHAPES}
                calls = [(fn, xs[w.shape[1]]) for (_, fn, _), (_, w) in zip(fns, weights, strict=True)]

                def step(calls=calls) -> None:
                    for fn, x in calls:
                        fn(x)

                steps[(rows, kind)] = time_call(step, args.repeats, clock)
                for name, _, k, _ in SHAPES:
                    fn = next(f for n_, f, _ in fns if n_ == name)
                    hot[(rows, kind, name)] = time_call(lambda fn=fn, x=xs[k]: fn(x), args.repeats, clock)
            del fns, calls
    clock_name = "CPU-time" if args.threads == 1 else "wall"
    print(f"torch {torch.__version__}, {args.threads} thread(s), {clock_name} clock, best of {args.repeats}")
    for rows in args.rows:
        print(
            f"\n{rows} row(s): one decode step's 121 matmuls, distinct weights (ms), and us per call of one"
        )
        print("weight repeated (cache-hot)")
        print("| kernel | step ms | vs bf16 packed | " + " | ".join(f"{s[0]} us" for s in SHAPES) + " |")
        print("|" + " --- |" * (len(SHAPES) + 3))
        base = steps[(rows, "bf16 oneDNN packed")]
        for kind in KINDS:
            cells = " | ".join(f"{hot[(rows, kind, s[0])] * 1e6:.0f}" for s in SHAPES)
            print(
                f"| {kind} | {steps[(rows, kind)] * 1e3:.2f} | {base / steps[(rows, kind)]:.2f}x | {cells} |"
            )


if __name__ == "__main__":
    main()
