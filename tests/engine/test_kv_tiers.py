"""The second KV tier through the engine: greedy tokens equal with the tier on and off while a
tiny device pool (256 slots) forces demotions and loads, each write policy; a restarted engine
on the same directory finds the pages, skips corrupted, truncated and foreign ones (the same
tokens still); both tiers' invariants are checked after every step (`debug_invariants`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sglr.engine.config import EngineConfig
from sglr.engine.kv.page_store import PageStore
from sglr.errors import EngineConfigError, HiCacheStorageError

GREEDY = {"max_new_tokens": 6, "temperature": 0.0}
PAGE = 16
# Six 100-token prompts: 576 tokens of whole pages against a 256-slot device pool.
PROMPTS = [np.random.default_rng(seed).integers(5, 200, 100).tolist() for seed in range(6)]
TIERED = {
    "max_total_tokens": 256,
    "enable_hierarchical_cache": True,
    "hicache_page_size": PAGE,
    "hicache_ratio": 8.0,
}


def outputs(engine, prompts=PROMPTS) -> tuple[list[list[int]], list[int]]:
    results = [engine.generate(input_ids=p, sampling_params=GREEDY) for p in prompts]
    return [r["output_ids"] for r in results], [r["meta_info"]["cached_tokens"] for r in results]


@pytest.fixture(scope="module")
def reference(make_engine, tiny_dir: Path) -> list[list[int]]:
    engine = make_engine(tiny_dir, max_total_tokens=4096)
    try:
        return outputs(engine)[0]
    finally:
        engine.shutdown()


@pytest.mark.parametrize("policy", ["write_through", "write_through_selective", "write_back"])
def test_greedy_tokens_equal_with_the_tier_and_prefixes_come_back_from_it(
    make_engine, tiny_dir: Path, reference: list[list[int]], policy: str
) -> None:
    engine = make_engine(tiny_dir, hicache_write_policy=policy, **TIERED)
    try:
        rounds = [outputs(engine) for _ in range(3)]
        stats = engine.get_stats()
    finally:
        engine.shutdown()
    assert all(tokens == reference for tokens, _ in rounds)
    # The device pool cannot hold the six prompts: hits in the last round came from the tier.
    # (write_through_selective stores a page at its second prompt, so only round 3 hits.)
    assert rounds[0][1] == [0] * 6
    assert rounds[2][1] == [96] * 6
    assert stats["hicache_loaded_tokens"] >= 6 * 96 - 256
    assert stats["hicache_written_pages"] == stats["hicache_stored_pages"] == 6 * 6


def test_the_fused_gguf_decode_reads_loaded_bf16_pages(make_engine, tiny_dir: Path, tmp_path: Path) -> None:
    """A quantized GGUF model on the CPU: bf16 KV, read by the Rust fused decode step from the
    pool's tensors, which loads write into."""
    from sglr.testing.tiny_gguf import write_quantized_gguf

    gguf = write_quantized_gguf(tiny_dir, tmp_path / "tiny.gguf")
    plain = make_engine(gguf, max_total_tokens=4096)
    try:
        expected = outputs(plain)[0]
        assert plain.runner.fused_decode is not None
    finally:
        plain.shutdown()
    tiered = make_engine(gguf, **TIERED)
    try:
        rounds = [outputs(tiered) for _ in range(2)]
    finally:
        tiered.shutdown()
    assert [tokens for tokens, _ in rounds] == [expected, expected]
    assert rounds[1][1] == [96] * 6


def test_a_restarted_engine_finds_the_pages_and_skips_bad_ones(
    make_engine, tiny_dir: Path, reference: list[list[int]], tmp_path: Path
) -> None:
    stored = {
        **TIERED,
        "hicache_storage_backend": "file",
        "hicache_storage_dir": str(tmp_path),
        "hicache_storage_prefetch_policy": "wait_complete",
    }
    first = make_engine(tiny_dir, **stored)
    try:
        assert outputs(first)[1] == [0] * 6
    finally:
        first.shutdown()

    second = make_engine(tiny_dir, **stored)
    try:
        with pytest.raises(HiCacheStorageError, match="another server"):
            PageStore(str(tmp_path), 1 << 20, np.float32, (1, PAGE, 1, 1))
        tokens, cached = outputs(second)
        assert tokens == reference
        assert cached == [96] * 6  # every whole page of every prompt, from disk
    finally:
        second.shutdown()

    first_pages = [_first_page_of(tmp_path, prompt) for prompt in PROMPTS[:4]]
    corrupted, truncated, foreign, other = first_pages
    data = bytearray(corrupted.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupted.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:-100])
    foreign.write_bytes(other.read_bytes())  # a valid page, under another prefix's key

    third = make_engine(tiny_dir, **stored)
    try:
        tokens, cached = outputs(third)
        stats = third.get_stats()
    finally:
        third.shutdown()
    assert tokens == reference
    assert stats["hicache_corrupt_pages"] == 3
    assert cached == [0, 0, 0, 96, 96, 96]  # a bad first page: the prompt is recomputed


def _first_page_of(directory: Path, prompt: list[int]) -> Path:
    """The stored page of the first `PAGE` tokens of `prompt` (found by its header)."""
    for path in (directory / "pages").rglob("*.kvpage"):
        data = path.read_bytes()
        header_len = int.from_bytes(data[8:12], "little")
        if json.loads(data[12 : 12 + header_len])["tokens"] == prompt[:PAGE]:
            return path
    raise AssertionError("no stored first page")


def test_hicache_options_are_checked() -> None:
    with pytest.raises(EngineConfigError, match="hicache_write_policy"):
        EngineConfig(enable_hierarchical_cache=True, hicache_write_policy="write_around")
    with pytest.raises(EngineConfigError, match="hicache_storage_dir"):
        EngineConfig(enable_hierarchical_cache=True, hicache_storage_backend="file")
    with pytest.raises(EngineConfigError, match="needs enable_hierarchical_cache"):
        EngineConfig(hicache_storage_backend="file", hicache_storage_dir="/tmp/x")
    with pytest.raises(EngineConfigError, match="radix cache"):
        EngineConfig(enable_hierarchical_cache=True, disable_radix_cache=True)
    with pytest.raises(EngineConfigError, match="generation only"):
        EngineConfig(enable_hierarchical_cache=True, is_embedding=True)
    assert EngineConfig(enable_hierarchical_cache=True, tp_size=2).tp_size == 2  # test_kv_tiers_tp.py


def test_hicache_flags_become_engine_options() -> None:
    from sglr.server.launch import build_parser, engine_options

    args = build_parser().parse_args(
        [
            "--enable-hierarchical-cache",
            "--hicache-ratio",
            "4",
            "--hicache-write-policy",
            "write_back",
            "--hicache-storage-backend",
            "file",
            "--hicache-storage-dir",
            "/tmp/kv",
            "--hicache-storage-prefetch-policy",
            "timeout",
        ]
    )
    options = engine_options(args)
    assert options["enable_hierarchical_cache"] is True
    assert options["hicache_ratio"] == 4.0
    assert options["hicache_write_policy"] == "write_back"
    assert options["hicache_storage_dir"] == "/tmp/kv"
    assert options["hicache_storage_prefetch_policy"] == "timeout"
    EngineConfig(**options)  # a valid engine config


def test_the_tier_metrics_are_gauges_of_the_engine_stats() -> None:
    from types import SimpleNamespace

    from sglr.server.metrics import _EngineGauges

    stats = {
        "num_running_requests": 0,
        "num_waiting_requests": 0,
        "kv_usage": 0.0,
        "cache_hit_rate": 0.5,
        "num_kv_slots": 256,
        "num_cached_kv_slots": 10,
        "generation_tokens_per_s": 1.0,
        "hicache_loaded_tokens": 96,
        "hicache_loaded_bytes": 4096,
        "hicache_written_bytes": 8192,
        "hicache_load_seconds": 0.25,
    }
    gauges = _EngineGauges(SimpleNamespace(get_stats=lambda: stats), "m")
    values = {family.name: family.samples[0].value for family in gauges.collect()}
    assert values["sglr:hicache_loaded_tokens"] == 96
    assert values["sglr:hicache_loaded_bytes"] == 4096
    assert values["sglr:hicache_written_bytes"] == 8192
    assert values["sglr:hicache_load_seconds"] == 0.25
