"""`benches/speculative_cpu.py`'s pure parts: its prompts, the identity check and the table (no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

import speculative_cpu
from benchlib.speculative_prompts import PERSON_SCHEMA, WORKLOADS, build, person_paragraph


def test_a_batch_of_sixteen_holds_sixteen_different_prompts_of_every_workload() -> None:
    for workload in WORKLOADS:
        prompts = build(workload, 16)
        assert len({json.dumps(p.messages) for p in prompts}) == 16, workload
        assert build(workload, 16) == prompts, workload  # deterministic


def test_only_the_schema_workload_is_constrained_and_its_schema_accepts_the_paragraphs_facts() -> None:
    for workload in WORKLOADS:
        constrained = {p.json_schema is not None for p in build(workload, 4)}
        assert constrained == {workload == "JSON extract + schema"}, workload
    schema = json.loads(build("JSON extract + schema", 1)[0].json_schema)
    assert schema == PERSON_SCHEMA
    paragraph = person_paragraph(0)  # "Amara Okafor is 24 years old and works as a nurse in Marrakesh..."
    facts = {
        "name": "Amara Okafor",
        "age": 24,
        "city": "Marrakesh",
        "occupation": "nurse",
        "hobby": "birdwatching",
    }
    for value in facts.values():
        assert str(value) in paragraph
    jsonschema.validate(facts, schema)


def test_first_difference_counts_a_shorter_output_as_differing() -> None:
    assert speculative_cpu.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert speculative_cpu.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert speculative_cpu.first_difference([1, 2], [1, 2, 3]) == 2
    assert speculative_cpu.first_difference([], []) is None


def _run(seconds: float, output_ids: list[list[int]], passes: int, verify: int, accepted: int):
    generated = sum(len(ids) for ids in output_ids)
    return speculative_cpu.Run(seconds, output_ids, passes, verify, accepted, generated)


def test_the_table_row_reports_ratio_accepted_length_passes_and_identity() -> None:
    cell = speculative_cpu.Cell("quote passage", "copy", 1, build("quote passage", 2))
    cell.runs["off"] = _run(2.0, [[1] * 10, [2] * 10], passes=20, verify=0, accepted=0)
    cell.runs["NGRAM"] = _run(0.5, [[1] * 10, [2] * 9 + [7]], passes=5, verify=4, accepted=14)
    assert speculative_cpu.identity(cell) == (1, 2)
    row = speculative_cpu.table([cell])[2]
    assert (
        row
        == "| quote passage | copy | 1 | 10.0 | 40.0 | 4.00x | 3.50 | 1.000 | 0.250 | 100.0 | 100.0 | 1/2 |"
    )
    summary = speculative_cpu.summary([cell])
    assert summary[-1] == "| copy | 1 | 10.0 | 40.0 | 4.00x | 2.00x |"


def test_a_pass_without_drafts_has_no_accepted_length() -> None:
    assert speculative_cpu.mean_accepted_length(_run(1.0, [[1]], 1, 0, 0)) is None


def test_runs_of_a_cell_add_up_call_by_call() -> None:
    total = speculative_cpu.Run() + _run(1.0, [[1, 2]], 2, 1, 1) + _run(3.0, [[3]], 1, 0, 0)
    assert total == _run(4.0, [[1, 2], [3]], 3, 1, 1)
    assert total.tokens_per_s == 0.75
