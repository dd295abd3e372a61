"""The KV page store on its own: pages round-trip, bad pages are refused, the byte bound evicts
least recently used pages (across a reopen too), and a writer killed mid-write leaves a
directory the next store opens with every indexed page whole."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from sglr.engine.kv import page_file
from sglr.engine.kv.page_file import PageData
from sglr.engine.kv.page_keys import namespace_seed, page_keys
from sglr.engine.kv.page_store import PageStore
from sglr.errors import CorruptPageError

SHAPE = (2, 4, 1, 8)  # layers, page tokens, kv heads, head dim
SEED = namespace_seed(b"model", None)


def page(value: float) -> PageData:
    return PageData(torch.full(SHAPE, float(value)), torch.full(SHAPE, -float(value)))


def tokens(i: int) -> np.ndarray:
    return np.arange(100 + i * 4, 104 + i * 4)


def test_a_page_round_trips_and_anything_else_is_refused() -> None:
    data = page_file.encode("k1", SEED, tokens(0), page(1.5))
    back = page_file.decode(data, "k1", SEED, tokens(0), torch.float32, SHAPE)
    assert torch.equal(back.k, page(1.5).k) and torch.equal(back.v, page(1.5).v)
    flipped = bytearray(data)
    flipped[-40] ^= 1
    bad = {
        "checksum": bytes(flipped),
        "truncated": data[:-1],
        "not a KV page": b"hello",
    }
    for name, raw in bad.items():
        with pytest.raises(CorruptPageError, match=name):
            page_file.decode(raw, "k1", SEED, tokens(0), torch.float32, SHAPE)
    for args in [
        ("k2", SEED, tokens(0)),
        ("k1", namespace_seed(b"other", None), tokens(0)),
        ("k1", SEED, tokens(1)),
    ]:
        with pytest.raises(CorruptPageError, match="another prefix"):
            page_file.decode(data, *args, torch.float32, SHAPE)


def test_keys_chain_the_prefix_and_the_namespace() -> None:
    ids = np.arange(12)
    keys = page_keys(SEED, ids, 4)
    assert len(keys) == 3 and len(set(keys)) == 3
    assert page_keys(SEED, ids[:9], 4) == keys[:2]  # a partial page has no key
    changed = ids.copy()
    changed[0] = 99
    assert not set(page_keys(SEED, changed, 4)) & set(keys)  # every later page changes too
    assert not set(page_keys(namespace_seed(b"model", "lora:1"), ids, 4)) & set(keys)


def test_the_byte_bound_evicts_least_recently_used_pages(tmp_path: Path) -> None:
    size = len(page_file.encode("k0", SEED, tokens(0), page(0.0)))
    store = PageStore(str(tmp_path), 3 * size, torch.float32, SHAPE)
    for i in range(3):
        assert store.write(f"k{i}", SEED, tokens(i), page(i)) == size
    assert store.read("k0", SEED, tokens(0)) is not None  # k1 is now the oldest
    store.write("k3", SEED, tokens(3), page(3))
    store.check_invariants()
    assert [store.contains(f"k{i}") for i in range(4)] == [True, False, True, True]
    store.close()
    reopened = PageStore(str(tmp_path), 2 * size, torch.float32, SHAPE)  # a smaller bound
    reopened.check_invariants()
    assert reopened.num_pages == 2 and reopened.contains("k3")
    reopened.close()


def _write_pages_until_killed(directory: Path, ready_fd: int) -> None:
    """The forked writer: its third page is killed after its bytes, before its rename."""
    rename = os.replace

    def slow_rename(src: str, dst: str) -> None:
        if "k2" in dst:
            os.write(ready_fd, b"x")
            time.sleep(60)
        rename(src, dst)

    page_file.os.replace = slow_rename  # type: ignore[attr-defined]
    store = PageStore(str(directory), 1 << 20, torch.float32, SHAPE)
    for i in range(4):
        store.write(f"k{i}", SEED, tokens(i), page(i))


def test_a_writer_killed_mid_write_leaves_a_usable_directory(tmp_path: Path) -> None:
    ready_read, ready_write = os.pipe()
    pid = os.fork()  # a process of its own (its own lock), without a second interpreter start
    if pid == 0:
        try:
            _write_pages_until_killed(tmp_path, ready_write)
        finally:
            os._exit(1)
    try:
        assert os.read(ready_read, 1) == b"x"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_read)
        os.close(ready_write)
    leftovers = [name for _, _, names in os.walk(tmp_path) for name in names if page_file.TMP_MARK in name]
    assert len(leftovers) == 1  # the page being written when the writer died
    store = PageStore(str(tmp_path), 1 << 20, torch.float32, SHAPE)  # the dead writer's lock is gone
    store.check_invariants()
    assert [store.contains(f"k{i}") for i in range(4)] == [True, True, False, False]
    for i in range(2):
        assert torch.equal(store.read(f"k{i}", SEED, tokens(i)).k, page(i).k)
    assert not [name for _, _, names in os.walk(tmp_path) for name in names if page_file.TMP_MARK in name]
    store.close()


def test_pages_of_adapters_are_keyed_for_this_process_only() -> None:
    """A restart may give an adapter id to another adapter: those pages must not be found."""
    from types import SimpleNamespace

    from sglr.engine.kv.hicache_config import HiCacheConfig
    from sglr.engine.kv.tiers import KVTiers

    config = HiCacheConfig("write_through", "best_effort", 4, 1 << 20, None)
    kv_cache = SimpleNamespace(k_buffer=torch.zeros(2, 9, 1, 8), v_buffer=torch.zeros(2, 9, 1, 8))
    first, second = (KVTiers(config, kv_cache, b"model") for _ in range(2))
    try:
        assert first._seed("user") == second._seed("user") == namespace_seed(b"model", "user")
        adapter = "user\x00lora:1"
        assert first._seed(adapter) == first._seed(adapter) != second._seed(adapter)
    finally:
        first.close()
        second.close()


def _kv_value(tokens: np.ndarray, i: int) -> float:
    """The stand-in KV of token i: it depends on the whole prefix, as real KV does."""
    return float(hash(tuple(tokens[: i + 1].tolist())) % 997)


@pytest.mark.parametrize("policy", ["write_through", "write_through_selective", "write_back"])
def test_random_lifecycles_over_a_tiny_pool_read_back_the_kv_they_wrote(policy: str) -> None:
    """KVPool + tier over a 48-slot pool: every matched prefix (device or loaded) holds the KV
    its tokens were given; both tiers' invariants hold after every request."""
    from types import SimpleNamespace

    from sglr.engine.kv import KVPool, RequestKV
    from sglr.engine.kv.hicache_config import HiCacheConfig
    from sglr.engine.kv.tiers import KVTiers

    num_slots = 48
    kv_cache = SimpleNamespace(
        k_buffer=torch.zeros(2, num_slots + 1, 1, 2), v_buffer=torch.zeros(2, num_slots + 1, 1, 2)
    )
    pool = KVPool(num_slots, 4)
    pool.attach_tiers(KVTiers(HiCacheConfig(policy, "best_effort", 4, 1 << 20, None), kv_cache, b"m"))
    rng = np.random.default_rng(0)
    stems = [rng.integers(1, 50, 24) for _ in range(5)]
    num_loaded = 0
    try:
        for _ in range(120):
            tokens = np.concatenate([stems[rng.integers(5)], rng.integers(1, 50, rng.integers(1, 8))])
            pool.prefetch(tokens, None)
            num_loaded += pool.load_prefetched()
            slots, node = pool.tree.match_prefix(tokens[:-1])
            expected = [_kv_value(tokens, i) for i in range(slots.size)]
            assert kv_cache.k_buffer[0, slots, 0, 0].tolist() == expected
            assert kv_cache.v_buffer[1, slots, 0, 1].tolist() == [-x for x in expected]
            pool.tree.lock(node)
            kv = RequestKV()
            assert pool.admit(kv, slots, node)
            assert pool.reserve([kv], [tokens.size - slots.size])
            for i in range(slots.size, tokens.size):
                kv_cache.k_buffer[:, kv.slots[i]] = _kv_value(tokens, i)
                kv_cache.v_buffer[:, kv.slots[i]] = -_kv_value(tokens, i)
            pool.commit(kv)
            pool.release(kv, tokens, None, keep=True)
            pool.check_invariants()
    finally:
        pool.close()
    assert num_loaded > 100  # the tier served prefixes the device pool had evicted
