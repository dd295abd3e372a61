"""`benches/extend_graph_gpu.py` on the CPU: no graphs there, so it compares the padded batch run
eagerly with the unpadded one; the table's rows and their agreement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benches" / "extend_graph_gpu.py"


def test_cpu_run_prints_one_agreeing_row_per_shape() -> None:
    run = subprocess.run(
        [sys.executable, str(BENCH), "--preset", "tiny", "--device", "cpu", "--backend", "torch", "--steps", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [
        line.split("|")[1:-1]
        for line in run.stdout.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [r[0].strip() for r in rows] == ["1 x 4", "1 x 16", "4 x 8", "1 x 48", "4 x 16", "2 x 30"]
    assert [int(r[2]) for r in rows] == [16, 16, 32, 64, 64, 64]  # the bucket of each batch's tokens
    for row in rows:
        assert float(row[3]) > 0 and float(row[4]) > 0
        assert row[7].strip() == "True"  # the padded batch picks the same tokens
