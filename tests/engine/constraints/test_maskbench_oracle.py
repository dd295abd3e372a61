"""MaskBench sample as an oracle (CI subset; `benches/maskbench_oracle.py` runs all of it).

Every valid instance is fed token by token (cl100k_base) and must be accepted, every invalid
one must be rejected somewhere, and schemas we cannot enforce must be refused at compile time
with a typed error naming the problem.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
NUM_FILES = 60


def load_oracle():
    spec = importlib.util.spec_from_file_location(
        "maskbench_oracle", REPO / "benches" / "maskbench_oracle.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def oracle():
    module = load_oracle()
    if module.data_dir() is None:
        pytest.skip(
            f"MaskBench sample not found beside the checkout ({module.DEFAULT_DATA}); set SGLR_MASKBENCH_DIR"
        )
    return module


@pytest.fixture(scope="module")
def results(oracle):
    encoding, vocab = oracle.cl100k()
    files = [p for p in oracle.select_files(oracle.data_dir(), None) if p.stat().st_size < 6_000]
    stride = len(files) / NUM_FILES
    subset = [files[int(i * stride)] for i in range(NUM_FILES)]
    return [oracle.check_file(path, encoding, vocab) for path in subset]


def test_invalid_instances_are_never_accepted(results) -> None:
    accepted = [(r.name, text) for r in results for text in r.invalid_accepted]
    assert sum(r.num_invalid for r in results) > 50
    assert accepted == []


def test_valid_instances_are_accepted(results) -> None:
    rejected = [(r.name, text) for r in results for text in r.valid_rejected]
    assert sum(r.num_valid for r in results) > 30
    assert rejected == []


def test_refusals_are_typed_and_name_the_keyword(results) -> None:
    compiled = [r for r in results if r.outcome in ("passing", "failing")]
    refused = [r for r in results if r.outcome == "refused"]
    assert len(compiled) >= NUM_FILES // 2
    for result in refused:
        keyword, _, message = result.detail.partition(": ")
        assert keyword and keyword in message, result.detail
    assert all(r.outcome != "error" for r in results), [r.detail for r in results if r.outcome == "error"]


def test_reorder_follows_pattern_properties() -> None:
    """Members matched by `patternProperties` are put in their pattern schema's order, as the
    compiler emits them (the oracle then feeds that order)."""
    module = load_oracle()
    service = {"properties": {"build": {}, "depends_on": {}, "image": {}, "ports": {}}}
    schema = {"type": "object", "patternProperties": {"^[a-z]+$": {"$ref": "#/definitions/service"}}}
    schema["definitions"] = {"service": service}
    data = {"web": {"image": "x", "ports": ["80"], "depends_on": ["db"]}, "Bad1": {"ports": 1, "image": 2}}
    reordered = module.reorder_like_schema(data, schema, schema)
    assert list(reordered["web"]) == ["depends_on", "image", "ports"]
    assert list(reordered["Bad1"]) == ["ports", "image"]  # no pattern matches: left as is


def test_reorder_follows_items_inside_one_of() -> None:
    """An array whose `items` sit in a `oneOf` branch (an array or null) has its objects put
    in the item schema's order too."""
    module = load_oracle()
    node = {"type": "object", "properties": {"name": {}, "required": {}, "type": {}}}
    nodes = {"oneOf": [{"type": "array", "items": {"$ref": "#/definitions/node"}}, {"type": "null"}]}
    schema = {"type": "object", "properties": {"nodes": nodes}, "definitions": {"node": node}}
    data = {"nodes": [{"type": "STRING", "name": "a", "required": True}]}
    reordered = module.reorder_like_schema(data, schema, schema)
    assert list(reordered["nodes"][0]) == ["name", "required", "type"]
