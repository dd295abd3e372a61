"""The CPU kernels for a GGUF file's block formats side by side, in one run: for each format kept
as stored (`sglr._core.GgufMatrix`), one transformer layer's matmuls of a 1B-class model (hidden
2048, MLP 8192: q/o 2048 x 2048, k/v 512 x 2048, gate/up 16384 x 2048, down 2048 x 8192) at 1 and
4 rows (decode batches), and the layer dequantized to bf16 (what prefill chunks of more rows
multiply). Weights are random valid blocks (speed does not depend on the values); one thread;
the best of `--repeats`. Weight bytes per second count the stored bytes.

    .venv/bin/python benches/gguf_block_kernels.py [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

# (name, rows, cols)
LAYER = (("q", 2048, 2048), ("k", 512, 2048), ("v", 512, 2048), ("o", 2048, 2048),
         ("gate_up", 16384, 2048), ("down", 2048, 8192))  # fmt: skip
# format -> (weights per block, bytes per block, byte offsets of fp16 scales to keep finite)
FORMATS = {
    "Q4_0": (32, 18, (0,)),
    "Q4_1": (32, 20, (0, 2)),
    "Q5_0": (32, 22, (0,)),
    "Q5_1": (32, 24, (0, 2)),
    "Q8_0": (32, 34, (0,)),
    "Q4_K": (256, 144, (0, 2)),
    "Q5_K": (256, 176, (0, 2)),
    "Q6_K": (256, 210, (208,)),
}


def random_blocks(kind: str, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    block_len, block_bytes, scale_offsets = FORMATS[kind]
    blocks = rng.integers(0, 256, size=(rows * cols // block_len, block_bytes), dtype=np.uint8)
    scale = np.full(len(blocks), 0.01, dtype="<f2").view(np.uint8).reshape(-1, 2)
    for at in scale_offsets:
        blocks[:, at : at + 2] = scale
    return blocks.reshape(rows, -1)


def best_of(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from sglr._core import GgufMatrix

    rng = np.random.default_rng(0)
    num_weights = sum(rows * cols for _, rows, cols in LAYER)
    print(f"one layer, {num_weights / 1e6:.0f}M weights, {args.threads} thread(s), best of {args.repeats}")
    print("| format | bits / weight | 1 row ms | 1 row GB/s | 4 rows ms | dequantize to bf16 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in FORMATS:
        matrices = [
            GgufMatrix([(kind, random_blocks(kind, rows, cols, rng))], cols) for _, rows, cols in LAYER
        ]
        num_bytes = sum(m.num_bytes for m in matrices)
        cells = []
        for num_rows in (1, 4):
            inputs = {m.cols: rng.standard_normal((num_rows, m.cols)).astype(np.float32) for m in matrices}
            outs = [np.empty((num_rows, m.rows), dtype=np.float32) for m in matrices]

            def layer(inputs=inputs, outs=outs, matrices=matrices) -> None:
                for m, out in zip(matrices, outs, strict=True):
                    m.matmul(inputs[m.cols], out, args.threads)

            cells.append(best_of(layer, args.repeats))
        dense = [np.empty((m.rows, m.cols), dtype=np.int16) for m in matrices]

        def dequantize(dense=dense, matrices=matrices) -> None:
            for m, out in zip(matrices, dense, strict=True):
                m.dequantize(out, args.threads)

        to_bf16 = best_of(dequantize, args.repeats)
        bits = num_bytes * 8 / num_weights
        print(
            f"| {kind} | {bits:.2f} | {cells[0] * 1e3:.2f} | {num_bytes / cells[0] / 1e9:.1f} "
            f"| {cells[1] * 1e3:.2f} | {to_bf16 * 1e3:.1f} |"
        )


if __name__ == "__main__":
    main()
