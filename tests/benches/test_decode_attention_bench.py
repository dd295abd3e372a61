"""`benches/decode_attention_gpu.py --smoke` (Triton interpreter, tiny fp32 shapes) and its sweep logic."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

from benchlib.decode_sweep import Axes, Config, Measured, common_tile, descend, fastest

BENCH = Path(__file__).resolve().parents[2] / "benches" / "decode_attention_gpu.py"
AXES = Axes(block_n=(32, 64, 128), num_warps=(2, 4, 8), num_stages=(None, 1, 2), num_splits=(1, 2, 4, 8))
START = Config(64, 4, None, 8)


def test_smoke_run_prints_sane_rows_and_matches_the_reference(tmp_path) -> None:
    out = tmp_path / "decode.json"
    run = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| batch | context | splits | kernel us | KV MB | GB/s |" in run.stdout
    assert "One tile for all shapes: DecodeTuning(" in run.stdout
    data = json.loads(out.read_text())
    rows = data["defaults"]
    assert [(r["batch"], r["context"]) for r in rows] == [(1, 70), (3, 70)]
    for r in rows:
        # K and V, 2 KV heads x head dim 16, fp32, of every cached token.
        assert r["kv_bytes"] == 2 * r["batch"] * r["context"] * 2 * 16 * 4
        assert r["kernel_s"] > 0 and r["copy_s"] > 0
        assert math.isclose(r["gbps"], r["kv_bytes"] / r["kernel_s"] / 1e9, rel_tol=1e-9)
        assert math.isclose(r["kernel_over_copy"], r["kernel_s"] / r["copy_s"], rel_tol=1e-9)
        assert r["ref_max_abs"] > 0
        # As the decode kernel's own tests compare fp32 outputs with the reference.
        assert r["max_abs_err"] <= 2e-5 + 1e-4 * r["ref_max_abs"]
    swept = data["sweep"]
    for batch in (1, 3):
        configs = [s for s in swept if s["batch"] == batch]
        assert {(s["block_n"], s["num_splits"]) for s in configs} >= {(64, 8), (64, 1), (32, 1)}
        assert all(s["ok"] and 0 < s["seconds"] < math.inf for s in configs)


def _separable_cost(config: Config) -> float:
    """Fastest at BLOCK_N 128, 8 warps, 2 stages, 2 splits; each tunable adds its own cost."""
    stages = {None: 0.3, 1: 0.2, 2: 0.0}[config.num_stages]
    return (
        1
        + abs(config.block_n - 128) / 64
        + abs(config.num_warps - 8) / 4
        + stages
        + abs(config.num_splits - 2)
    )


def test_descent_finds_the_optimum_of_a_separable_cost_measuring_each_config_once() -> None:
    calls: list[Config] = []

    def measure(config: Config) -> tuple[float, bool]:
        calls.append(config)
        return _separable_cost(config), True

    results = descend(START, AXES, measure, lambda: False)
    assert fastest(results).config == Config(128, 8, 2, 2)
    assert len(calls) == len(set(calls)) == len(results)
    assert len(results) < 4 * 3 * 3 * 3  # a descent, not the whole grid


def test_a_config_that_disagrees_with_the_reference_never_wins() -> None:
    def measure(config: Config) -> tuple[float, bool]:
        return _separable_cost(config), config.block_n != 128  # the fastest tile computes garbage

    best = fastest(descend(START, AXES, measure, lambda: False))
    assert best.config.block_n == 64 and best.ok


def test_descent_stops_when_out_of_time_keeping_what_it_measured() -> None:
    results = descend(START, AXES, lambda c: (_separable_cost(c), True), lambda: True)
    assert [r.config for r in results] == [START]


def test_common_tile_minimizes_the_geometric_mean_slowdown_over_shapes() -> None:
    fast_small, fast_large = (32, 4, None), (128, 8, 2)

    def shape(times: dict[tuple, float]) -> list[Measured]:
        return [Measured(Config(*tile, 4), seconds, True) for tile, seconds in times.items()]

    per_shape = [
        shape({fast_small: 1.0, fast_large: 1.5, (64, 4, None): 1.1}),
        shape({fast_small: 2.0, fast_large: 1.0, (64, 4, None): 1.1}),
    ]
    tile, slowdown = common_tile(per_shape)
    assert tile == (64, 4, None)  # 1.1 x 1.1 beats 1.0 x 2.0 and 1.5 x 1.0
    assert math.isclose(slowdown, 1.1)
    assert common_tile([shape({fast_small: 1.0}), shape({fast_large: 1.0})]) is None  # nothing in common
