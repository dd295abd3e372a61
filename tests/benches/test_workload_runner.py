"""The workload runner's smoke profile: every workload on every system it applies to, in one run.

Asserts completion and bookkeeping only (every program ran without error, hit rates were
measured and bounded by what the requests allow, the table and chart were written); speed is
for the benchmark to report, never for a test to assert.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

from benchlib.systems import SYSTEMS
from workloads.base import ProgramWorkload, ServingWorkload
from workloads.registry import BUILDERS


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory):
    import run_workloads

    output_dir = tmp_path_factory.mktemp("workloads")
    rows = run_workloads.run(
        "smoke", list(BUILDERS), list(SYSTEMS), seed=0, output_dir=str(output_dir), multimodal=True
    )
    return rows, output_dir


def test_every_system_completes_every_workload_it_applies_to(smoke_run) -> None:
    rows, _ = smoke_run
    cells = {(row.workload, row.system) for row in rows}
    for name, build in BUILDERS.items():
        workload = build("smoke", 0, 4096)
        for system in SYSTEMS.values():
            if system.applies_to(workload):
                assert (workload.name, system.name) in cells, (name, system.name)
    for row in rows:
        assert row.errors == [], (row.workload, row.system, row.errors[:1])
        assert row.num_programs > 0 and row.programs_per_s > 0
        assert len(row.latencies) == row.num_programs


def test_hit_rates_are_measured_and_within_the_optimum(smoke_run) -> None:
    rows, _ = smoke_run
    for row in rows:
        if row.system == "transformers":
            assert row.hit_rate is None
            continue
        assert row.hit_rate is not None and row.optimal is not None
        assert row.num_requests >= row.num_programs
        if row.system == "no-cache":
            assert row.hit_rate == 0.0
        # The optimum assumes an unbounded cache and the best order: nothing can beat it.
        assert 0.0 <= row.hit_rate <= row.optimal + 1e-9, (row.workload, row.system)
    sglr_rows = {row.workload: row for row in rows if row.system == "sglr"}
    # Workloads built around a shared prefix must have one, and the full system must reuse it.
    for name in ("few-shot", "react", "tree-of-thought", "multi-turn-short", "llm-judge"):
        assert sglr_rows[name].optimal > 0.3
        assert sglr_rows[name].hit_rate > 0.0


def test_table_and_chart_are_written(smoke_run) -> None:
    rows, output_dir = smoke_run
    table = (output_dir / "table.md").read_text()
    for row in rows:
        assert f"| {row.workload} | {row.system}" in table
    assert (output_dir / "chart.png").read_bytes().startswith(b"\x89PNG")


def test_multimodal_rows_report_cached_media_only_with_the_cache(smoke_run) -> None:
    """The image / video QA section: follow-up questions and a batch about seen media have the
    media's tokens cached with the cache on, none with it off."""
    _, output_dir = smoke_run
    table = (output_dir / "table.md").read_text()
    rows = {
        (m.group(1), m.group(2)): [cell.strip() for cell in m.group(3).split("|")]
        for m in re.finditer(r"^\| (image|video) QA \| ([\w-]+) \|(.*)$", table, re.M)
    }
    assert set(rows) == {(kind, system) for kind in ("image", "video") for system in ("cache", "no-cache")}
    for (kind, system), cells in rows.items():
        cached = [float(cells[3]), float(cells[5])]  # per follow-up, per question of the batch
        # 16 image tokens (56 / 14 squared), or 2 frames x 4 tokens, plus the text before them
        if system == "cache":
            assert all(value >= (16 if kind == "image" else 8) for value in cached), (kind, cells)
        else:
            assert cached == [0, 0], (kind, cells)


def test_workloads_are_seeded_and_sized_by_profile() -> None:
    for build in BUILDERS.values():
        first, again = build("smoke", 3, 4096), build("smoke", 3, 4096)
        bigger = build("cpu", 3, 4096)
        assert isinstance(first, (ProgramWorkload, ServingWorkload))
        if isinstance(first, ProgramWorkload):
            assert first.arguments == again.arguments
        else:
            assert [r.prompt_ids for r in first.requests] == [r.prompt_ids for r in again.requests]
        assert bigger.num_programs > first.num_programs
