"""The image/video-QA benchmark's smoke run: it completes, writes its table, and reports the
media tokens of follow-up questions cached with the cache on and none with it off (speed is for
the benchmark to report, never for a test to assert)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benches" / "image_qa_cpu.py"


def test_image_and_video_qa_smoke_run(tmp_path: Path) -> None:
    output = tmp_path / "table.md"
    args = ["--questions", "3", "--image-size", "56", "--video-frames", "2", "--max-new-tokens", "2",
            "--output", str(output)]  # fmt: skip
    subprocess.run([sys.executable, str(BENCH), *args], check=True, capture_output=True, timeout=300)
    rows = {
        (m.group(1), m.group(2)): [cell.strip() for cell in m.group(3).split("|")]
        for m in re.finditer(r"^\| (image|video) QA \| ([\w-]+) \|(.*)$", output.read_text(), re.M)
    }
    assert set(rows) == {(kind, system) for kind in ("image", "video") for system in ("cache", "no-cache")}
    for (kind, system), cells in rows.items():
        cached = [float(cells[3]), float(cells[5])]  # per follow-up, per question of the batch
        # 16 image tokens (56 / 14 squared), or 2 frames x 4 tokens, plus the text before them
        assert (
            all(value >= (16 if kind == "image" else 8) for value in cached)
            if system == "cache"
            else cached == [0, 0]
        )
