"""The image-QA benchmark's smoke run: it completes, writes its table, and reports the image
tokens of follow-up questions cached with the cache on and none with it off (speed is for the
benchmark to report, never for a test to assert)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benches" / "image_qa_cpu.py"


def test_image_qa_smoke_run(tmp_path: Path) -> None:
    output = tmp_path / "table.md"
    args = ["--questions", "3", "--image-size", "56", "--max-new-tokens", "2", "--output", str(output)]
    subprocess.run([sys.executable, str(BENCH), *args], check=True, capture_output=True, timeout=300)
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| image QA \| ([\w-]+) \|(.*)$", output.read_text(), re.M)
    }
    cached = {name: [float(x) for x in row.split("|")[2:5:2]] for name, row in rows.items()}
    # 16 image tokens (56 / 14 squared) plus the text before them, per follow-up and per question
    assert all(value >= 16 for value in cached["cache"])
    assert cached["no-cache"] == [0.0, 0.0]
