"""Run as a script under an `SGLR_CPU_ISA` cap by tests/kernels/test_cpu_isa.py: the instruction
set the process reports and the results of the Rust kernels on seeded inputs, saved to one .npz.

    python isa_probe.py OUT.npz MODEL.gguf

- `matmul_<type>`: int8-activation products of a 48 x 256 matrix of every GGUF kernel format
  (4-, 5- and 8-bit blocks, K-quants) with 3 rows; `dense_<type>` the matrix dequantized (exact
  in float32) and `inputs` the rows, for the test's float64 bound.
- `q8_f32`: the 8-bit head's f32 product (`q8_linear`), with `q8_dense`.
- `fused`: the fused decode step's teacher-forced logits on MODEL (a 4-bit tiny GGUF file),
  after a prefill through the layered quantized path; `exact`: the same positions on the fp32
  dequantized path (torch only: the same on every instruction set).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

PROMPT_LEN, NUM_STEPS = 23, 6
KERNEL_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K")


def kernel_results() -> dict[str, np.ndarray]:
    import torch
    from gguf import GGMLQuantizationType, quants

    from sglr.kernels.cpu_q8 import Q8Weight, q8_linear
    from sglr.kernels.cpu_quantized import dequantize_matrix, gguf_matrix, integer_matmul

    sys.path.insert(0, str(Path(__file__).parents[1] / "model"))
    from kquant_testing import K_TYPES, quantize_k  # the gguf package writes no K-quants

    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((3, 256)).astype(np.float32)
    results = {"inputs": inputs}
    for name in KERNEL_TYPES:
        weight = rng.standard_normal((48, 256)).astype(np.float32)
        ggml_type = GGMLQuantizationType[name]
        quantize = quantize_k if ggml_type in K_TYPES else quants.quantize
        blocks = quantize(weight, ggml_type)
        matrix = gguf_matrix([(name, blocks.reshape(48, -1))], 256)
        results[f"matmul_{name}"] = integer_matmul(torch.from_numpy(inputs), matrix, 48).numpy()
        results[f"dense_{name}"] = dequantize_matrix(matrix).numpy()
    levels = rng.integers(-127, 128, size=(40, 256), dtype=np.int8)
    scales = rng.uniform(1e-3, 2e-2, size=(40, 256 // 32)).astype(np.float32)
    results["q8_f32"] = q8_linear(torch.from_numpy(inputs), Q8Weight(levels, scales)).numpy()
    results["q8_dense"] = levels.astype(np.float32) * np.repeat(scales, 32, axis=1)
    return results


def teacher_forced(runner, tokens: list[int]) -> np.ndarray:
    """Logits of the decode steps after a `PROMPT_LEN`-token prefill in request row 1."""
    from sglr.model.forward_batch import ExtendRequest

    empty = np.zeros(0, dtype=np.int64)
    prompt = np.array(tokens[:PROMPT_LEN])
    runner.forward_extend([ExtendRequest(1, prompt, empty, np.arange(1, PROMPT_LEN + 1))])
    logits = []
    for n in range(PROMPT_LEN, len(tokens)):
        out = runner.forward_decode([1], [tokens[n]], [n + 1], [n + 1])
        logits.append(out.next_token_logits[0].numpy().copy())
    return np.stack(logits)


def model_results(model_path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    from sglr.model.runner import ModelRunner, RunnerConfig

    def runner(**kwargs) -> ModelRunner:
        return ModelRunner(
            RunnerConfig(model_path, device="cpu", kv_num_tokens=256, max_num_reqs=2, **kwargs)
        )

    tokens = np.random.default_rng(1).integers(3, 200, size=PROMPT_LEN + NUM_STEPS).tolist()
    fused = runner(gguf_weights="quantized")
    assert fused.fused_decode is not None
    results = {
        "fused": teacher_forced(fused, tokens),
        "exact": teacher_forced(runner(dtype="float32"), tokens),
    }
    return results, {"runner": fused.cpu_isa, "fused_step": fused.fused_decode._model.isa}


def main(out: str, model_path: str) -> None:
    from sglr._core import cpu_isa

    isa, cpu, requested = cpu_isa()
    results = kernel_results()
    model, reported = model_results(model_path)
    report = {"isa": isa, "cpu": cpu, "requested": requested, **reported}
    np.savez(out, report=np.array(json.dumps(report)), **results, **model)


if __name__ == "__main__":
    main(*sys.argv[1:])
