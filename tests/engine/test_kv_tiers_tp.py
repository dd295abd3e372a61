"""The second KV tier under tensor parallelism (gloo, 2 CPU worker ranks, each with its own KV
head, write_back): greedy tokens equal with the tier on and off while a 256-slot pool forces
demotions and loads (off: the first round, which reuses nothing, and an in-process tp=1 engine,
whose tokens tp=2's equal: test_tensor_parallel.py); a restarted engine finds the prefixes again
in every rank's own directory; a page only one follower rank lost makes every rank recompute it
(the ranks agree on what loads); every rank's tier invariants are checked after every step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

GREEDY = {"max_new_tokens": 4, "temperature": 0.0}
PAGE = 16
# Four 100-token prompts: 384 tokens of whole pages against a 256-slot device pool.
PROMPTS = [np.random.default_rng(seed).integers(5, 200, 100).tolist() for seed in range(4)]
POOL = {"max_total_tokens": 256, "tp_size": 2}


def outputs(engine) -> tuple[list[list[int]], list[int]]:
    results = [engine.generate(input_ids=p, sampling_params=GREEDY) for p in PROMPTS]
    return [r["output_ids"] for r in results], [r["meta_info"]["cached_tokens"] for r in results]


def headers(rank_dir: Path) -> dict[str, dict]:
    """Each stored page's header, by file name."""
    found = {}
    for path in (rank_dir / "pages").rglob("*.kvpage"):
        data = path.read_bytes()
        header_len = int.from_bytes(data[8:12], "little")
        found[path.name] = json.loads(data[12 : 12 + header_len])
    return found


@pytest.fixture(scope="module")
def reference(make_engine, tiny_dir: Path) -> list[list[int]]:
    engine = make_engine(tiny_dir, max_total_tokens=4096)
    try:
        return outputs(engine)[0]
    finally:
        engine.shutdown()


def test_tp2_tier_gives_the_same_tokens_and_survives_a_restart(
    make_engine, tiny_dir: Path, reference: list[list[int]], tmp_path: Path
) -> None:
    stored = {
        **POOL,
        "enable_hierarchical_cache": True,
        "hicache_page_size": PAGE,
        "hicache_ratio": 8.0,
        # write_back: pages leave each rank's device pool when rank 0 evicts, and at shutdown.
        "hicache_write_policy": "write_back",
        "hicache_storage_backend": "file",
        "hicache_storage_dir": str(tmp_path),
        "hicache_storage_prefetch_policy": "wait_complete",
    }
    first = make_engine(tiny_dir, **stored)
    try:
        rounds = [outputs(first) for _ in range(2)]
        stats = first.get_stats()
        first.check_invariants()
    finally:
        first.shutdown()
    assert [tokens for tokens, _ in rounds] == [reference] * 2
    assert rounds[0][1] == [0] * 4
    assert rounds[1][1] == [96] * 4  # the pool holds 256 of 384 page tokens: the rest loaded
    assert stats["hicache_loaded_tokens"] >= 4 * 96 - 256

    rank_dirs = [tmp_path / f"tp2-rank{rank}" for rank in range(2)]
    rank0, rank1 = (headers(d) for d in rank_dirs)
    assert stats["hicache_stored_pages"] > 0  # evicted while serving
    assert len(rank0) == 4 * 6  # and the rest at shutdown
    assert rank0.keys() == rank1.keys()  # the same pages, under rank 0's keys
    for name, header in rank0.items():
        assert rank1[name]["tokens"] == header["tokens"]
        assert rank1[name]["seed"] != header["seed"]  # each rank's own weights and KV head
    some_page = next(iter(rank0))
    shard0, shard1 = (next(d.rglob(some_page)).read_bytes() for d in rank_dirs)
    assert shard0[-1000:] != shard1[-1000:]  # different KV heads

    # Rank 1 alone loses the first page of the first prompt: every rank recomputes that prompt.
    lost = next(name for name, h in rank1.items() if h["tokens"] == PROMPTS[0][:PAGE])
    next(rank_dirs[1].rglob(lost)).unlink()
    second = make_engine(tiny_dir, **stored)
    try:
        tokens, cached = outputs(second)
        second.check_invariants()
    finally:
        second.shutdown()
    assert tokens == reference
    assert cached == [0, 96, 96, 96]  # the others' prefixes, found again after the restart
