"""`SGLR_CPU_ISA` caps the Rust kernels' instruction set (rust/kernels' isa, read once per process,
so each run is a subprocess): under each cap this CPU can run, the process, the model runner and
the fused decode step report it, and the kernels' results stay within bounds derived from the
portable version's results on the same inputs, on this machine. An unknown value fails the load."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sglr import envs
from sglr._core import cpu_isa as kernels_isa

PROBE = Path(__file__).with_name("isa_probe.py")
ORDER = ["portable", "avx2", "avx512vnni"]
# float32's unit roundoff.
UNIT_ROUNDOFF = 2.0**-24


def _env(cap: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SGLR_CPU_ISA"}
    if cap is not None:
        env["SGLR_CPU_ISA"] = cap
    return env


def _host_isas() -> list[str]:
    """Every instruction set this CPU runs, portable first (the CPU's best whatever the cap)."""
    _, cpu, _ = kernels_isa()
    return ORDER[: ORDER.index(cpu) + 1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, np.ndarray]]:
    """The probe's results under each cap this CPU can run."""
    from sglr.testing.tiny import tiny_model_path
    from sglr.testing.tiny_gguf import write_quantized_gguf

    folder = tmp_path_factory.mktemp("isa")
    model = write_quantized_gguf(tiny_model_path("llama"), folder / "llama.gguf", "Q4_0")
    results = {}
    for cap in _host_isas():
        out = folder / f"{cap}.npz"
        done = subprocess.run(
            [sys.executable, str(PROBE), str(out), str(model)],
            env={**_env(cap), "SGLR_CACHE_DIR": str(folder / "cache")},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        with np.load(out) as saved:
            results[cap] = {key: saved[key] for key in saved.files}
    return results


def test_each_cap_is_what_the_process_runner_and_fused_step_report(runs) -> None:
    host = _host_isas()
    assert list(runs) == host
    for cap, saved in runs.items():
        report = json.loads(str(saved["report"]))
        assert report == {
            "isa": cap, "cpu": host[-1], "requested": cap, "runner": cap, "fused_step": cap
        }, cap  # fmt: skip


def _reordering_bound(inputs: np.ndarray, dense: np.ndarray, num_terms: int) -> np.ndarray:
    """Twice the float32 error bound of a dot product of `num_terms` terms summed in any order
    (Higham's gamma_n times the sum of the terms' magnitudes): what separates two correct
    instruction sets computing the same products; a wrong lane, block or tail is off by the
    terms' own size. `inputs` carry half an int8 step (max/254 per block of 32) for the
    activations' rounding, the same on every instruction set (rust/kernels' act tests)."""
    blocks = np.abs(inputs.astype(np.float64)).reshape(inputs.shape[0], -1, 32)
    magnitudes = (blocks + blocks.max(axis=-1, keepdims=True) / 254).reshape(inputs.shape)
    gamma = num_terms * UNIT_ROUNDOFF / (1 - num_terms * UNIT_ROUNDOFF)
    return 2 * gamma * (magnitudes @ np.abs(dense.astype(np.float64)).T)


def test_kernel_products_agree_with_the_portable_ones_within_float32_reordering(runs) -> None:
    portable = runs["portable"]
    names = [key.removeprefix("matmul_") for key in portable if key.startswith("matmul_")]
    assert len(names) == 8  # every GGUF block format with a kernel
    for cap, saved in runs.items():
        np.testing.assert_array_equal(saved["inputs"], portable["inputs"])
        for name in names:
            # Dequantization is exact in float32 on every instruction set.
            np.testing.assert_array_equal(saved[f"dense_{name}"], portable[f"dense_{name}"], err_msg=cap)
            bound = _reordering_bound(portable["inputs"], portable[f"dense_{name}"], 2 * 256)
            difference = np.abs(saved[f"matmul_{name}"].astype(np.float64) - portable[f"matmul_{name}"])
            assert (difference <= bound).all(), (cap, name, (difference - bound).max())
        bound = _reordering_bound(portable["inputs"], portable["q8_dense"], 2 * 256)
        assert (np.abs(saved["q8_f32"].astype(np.float64) - portable["q8_f32"]) <= bound).all(), cap


def test_fused_steps_stay_closer_to_the_portable_ones_than_it_is_to_exact_math(runs) -> None:
    """Every instruction set quantizes the activations alike and sums the same integer products
    (rust/kernels' tests); only float32 rounding (attention, norms, scales) differs, so a
    vector path's logits are nearer the portable ones than those are to the fp32 dequantized
    path (int8 activations: ~1/254 of each block): a bug in a vector kernel (a lane, a tail, a
    slot) is off by the logits' own size."""
    portable = runs["portable"]
    own_error = np.abs(portable["fused"] - portable["exact"]).max(axis=-1)
    assert (own_error > 0).all() and (own_error < 0.15 * np.abs(portable["exact"]).max()).all()
    for cap, saved in runs.items():
        difference = np.abs(saved["fused"] - portable["fused"]).max(axis=-1)
        assert (difference <= own_error).all(), (cap, difference, own_error)
        assert (saved["fused"].argmax(-1) == portable["fused"].argmax(-1)).all(), cap


def test_an_unknown_value_is_an_error_naming_the_choices_and_fails_the_model_load(monkeypatch) -> None:
    script = (
        "from sglr._core import cpu_isa\ntry:\n    cpu_isa()\nexcept ValueError as error:\n    print(error)"
    )
    for bad in ("avx-2", "amx"):
        done = subprocess.run([sys.executable, "-c", script], env=_env(bad), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert f'SGLR_CPU_ISA="{bad}"' in done.stdout and "portable, avx2, avx512vnni" in done.stdout
    # The runner asks before it loads anything (this process's cap is valid: stand in a bad one).
    import sglr._core
    from sglr.model.runner import ModelRunner, RunnerConfig

    def unknown():
        raise ValueError('SGLR_CPU_ISA="avx-2" is not one of portable, avx2, avx512vnni')

    monkeypatch.setattr(sglr._core, "cpu_isa", unknown)
    envs.cpu_isa.cache_clear()
    try:
        with pytest.raises(ValueError, match="SGLR_CPU_ISA"):
            ModelRunner(RunnerConfig("/no/such/model", device="cpu"))
    finally:
        envs.cpu_isa.cache_clear()


def test_a_cap_above_the_cpu_is_lowered_to_it_with_a_warning(monkeypatch, caplog) -> None:
    """The lowering itself is rust/kernels' (`IsaChoice`, unit-tested there for every pair); this
    checks what Python says about it, and on a CPU below the top, a real capped process."""
    import sglr._core

    monkeypatch.setattr(sglr._core, "cpu_isa", lambda: ("avx2", "avx2", "avx512vnni"))
    envs.cpu_isa.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="sglr.envs"):
            assert envs.cpu_isa() == "avx2"
            assert envs.cpu_isa() == "avx2"
    finally:
        envs.cpu_isa.cache_clear()
    warnings = [r.getMessage() for r in caplog.records if r.name == "sglr.envs"]
    assert warnings == ["SGLR_CPU_ISA=avx512vnni: this CPU offers at most avx2; the CPU kernels use avx2"]
    host = _host_isas()
    for above in ORDER[len(host) :]:
        script = "from sglr._core import cpu_isa; print(cpu_isa())"
        done = subprocess.run([sys.executable, "-c", script], env=_env(above), capture_output=True, text=True)
        assert done.stdout.strip() == str((host[-1], host[-1], above)), done.stderr
