"""Forward-batch layout and validation, KV cache sizing, and the request table's accounting."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from sglr.errors import BatchError, KVCacheCapacityError, ModelConfigError
from sglr.model.batch_rows import BatchLimits, RowWrites
from sglr.model.forward_batch import ExtendRequest, ForwardBatch, ForwardMode
from sglr.model.kv_cache import KVCache, KVCacheShape, kv_slots_for_memory_fraction
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path

LIMITS = BatchLimits(vocab_size=100, num_slots=50, max_num_reqs=4, max_context_len=16)


def req(row: int, num_prefix: int, num_new: int, first_slot: int = 1, **kw: object) -> ExtendRequest:
    slots = np.arange(first_slot, first_slot + num_prefix + num_new, dtype=np.int32)
    return ExtendRequest(row, np.arange(num_new) + 10, slots[:num_prefix], slots[num_prefix:], **kw)


def test_extend_batch_flattens_requests_with_positions_from_their_prefix() -> None:
    batch = ForwardBatch.extend([req(2, 3, 2, 1), req(1, 0, 3, 20)], "cpu", LIMITS)
    assert batch.mode is ForwardMode.EXTEND and (batch.batch_size, batch.num_tokens) == (2, 5)
    assert batch.positions.tolist() == [3, 4, 0, 1, 2]
    assert batch.out_cache_slots.tolist() == [4, 5, 20, 21, 22]
    assert batch.extend_starts.tolist() == [0, 2] and batch.seq_lens.tolist() == [5, 3]
    # The table receives each request's whole slot list (prefix + new).
    assert batch.table_rows.tolist() == [2] * 5 + [1] * 3
    assert batch.table_cols.tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert batch.table_slots.tolist() == [1, 2, 3, 4, 5, 20, 21, 22]
    assert (batch.max_seq_len, batch.max_extend_len) == (5, 3)


def test_decode_batch_puts_each_token_at_seq_len_minus_one() -> None:
    batch = ForwardBatch.decode([3, 1], [7, 8], [5, 1], [9, 10], "cpu", LIMITS)
    assert batch.positions.tolist() == [4, 0] and batch.prefix_lens.tolist() == [4, 0]
    assert batch.extend_lens.tolist() == [1, 1]


def test_decode_batch_carries_its_column_and_row_writes_for_the_table() -> None:
    writes = RowWrites(np.array([3, 3]), np.array([0, 2]), np.array([40, 41]))
    batch = ForwardBatch.decode([3, 1], [7, 8], [5, 1], [9, 10], "cpu", LIMITS, row_writes=writes)
    assert batch.table_rows.tolist() == [3, 3, 3, 1]
    assert batch.table_cols.tolist() == [0, 2, 4, 0]
    assert batch.table_slots.tolist() == [40, 41, 9, 10]
    plain = ForwardBatch.decode([3, 1], [7, 8], [5, 1], [9, 10], "cpu", LIMITS)
    assert plain.table_rows.tolist() == [3, 1] and plain.table_cols.tolist() == [4, 0]
    for bad, message in [
        (RowWrites(np.array([2]), np.array([0]), np.array([5])), "outside the batch"),  # row 2 not in it
        (RowWrites(np.array([3]), np.array([4]), np.array([5])), "outside the batch"),  # the new column
        (RowWrites(np.array([3]), np.array([0]), np.array([51])), "KV slot outside"),
    ]:
        with pytest.raises(BatchError, match=message):
            ForwardBatch.decode([3, 1], [7, 8], [5, 1], [9, 10], "cpu", LIMITS, row_writes=bad)


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ([], "at least one"),
        ([req(1, 2, 0)], "at least one new token"),
        (
            [ExtendRequest(1, np.arange(3), np.zeros(0, np.int32), np.arange(1, 3, dtype=np.int32))],
            "2 new slots",
        ),
        ([req(1, 2, 2, logprob_start=1)], "logprob_start 1"),
        ([req(1, 0, 2), req(1, 0, 2, 10)], "share a request row"),
        ([req(5, 0, 2)], "request row outside"),
        ([req(1, 0, 2, 50)], "KV slot outside"),  # slot 51 > 50
        ([req(1, 10, 7)], "exceeds max_context_len"),
    ],
)
def test_malformed_extend_batches_raise_batch_error(requests: list[ExtendRequest], message: str) -> None:
    with pytest.raises(BatchError, match=message):
        ForwardBatch.extend(requests, "cpu", LIMITS)


def test_out_of_vocabulary_and_malformed_decode_batches_raise() -> None:
    bad_token = ExtendRequest(1, np.array([100]), np.zeros(0, np.int32), np.array([1], np.int32))
    with pytest.raises(BatchError, match="vocabulary"):
        ForwardBatch.extend([bad_token], "cpu", LIMITS)
    with pytest.raises(BatchError, match="differ in length"):
        ForwardBatch.decode([1, 2], [3], [4, 5], [6, 7], "cpu", LIMITS)
    with pytest.raises(BatchError, match=">= 1"):
        ForwardBatch.decode([1], [3], [0], [6], "cpu", LIMITS)
    with pytest.raises(BatchError, match="at least one"):
        ForwardBatch.decode([], [], [], [], "cpu", LIMITS)


def test_kv_cache_rows_are_per_slot_with_a_padding_row() -> None:
    shape = KVCacheShape(num_layers=2, num_kv_heads=2, head_dim=4, dtype=torch.float32)
    cache = KVCache(shape, num_slots=10, device="cpu")
    assert cache.k_buffer.shape == (2, 11, 2, 4) and cache.num_slots == 10
    assert shape.bytes_per_token == 2 * 2 * 2 * 4 * 4
    k = torch.randn(3, 2, 4)
    cache.store(1, torch.tensor([10, 1, 4]), k, -k)
    assert torch.equal(cache.k_cache(1)[[10, 1, 4]], k) and torch.equal(cache.v_cache(1)[[10, 1, 4]], -k)
    assert cache.k_cache(0).abs().sum() == 0  # other layers untouched
    assert shape.num_tokens_for_bytes(shape.bytes_per_token * 11) == 10
    with pytest.raises(KVCacheCapacityError):
        KVCache(shape, num_slots=0, device="cpu")


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cpu_kv_cache_is_zero_and_resident_only_where_written(dtype: torch.dtype) -> None:
    """A large pool costs resident memory only for the rows written (zero pages until then): a
    few rows in every layer stay a few pages each (not a 2 MiB huge page each, as numpy's large
    allocations get)."""
    shape = KVCacheShape(num_layers=4, num_kv_heads=4, head_dim=64, dtype=dtype)
    before = _resident_bytes()
    cache = KVCache(shape, num_slots=65536, device="cpu")  # 128 or 256 MiB
    assert cache.memory_bytes() >= 128 << 20
    assert _resident_bytes() - before < 16 << 20
    rows = torch.tensor([1, 7, 65536])
    k = torch.randn(3, 4, 64).to(dtype)
    stored = _resident_bytes()
    for layer in range(4):
        cache.store(layer, rows, k, -k)
    # 16 pages written (2 MiB huge pages: 32 MiB).
    assert _resident_bytes() - stored < 4 << 20
    assert torch.equal(cache.k_cache(2)[rows], k) and torch.equal(cache.v_cache(2)[rows], -k)
    assert cache.k_cache(2).dtype == dtype and cache.k_cache(2).is_contiguous()
    assert not cache.k_buffer[1, 8:4096].any() and not cache.v_buffer[3, -100:-1].any()
    assert _resident_bytes() - before < 16 << 20


def test_kv_cache_sized_from_memory_fraction() -> None:
    shape = KVCacheShape(num_layers=2, num_kv_heads=2, head_dim=4, dtype=torch.float32)
    num_slots = kv_slots_for_memory_fraction(shape, torch.device("cpu"), 0.001)
    assert num_slots > 0
    with pytest.raises(KVCacheCapacityError):
        kv_slots_for_memory_fraction(shape, torch.device("cpu"), 1.5)


def test_runner_config_validation_and_runner_limits() -> None:
    with pytest.raises(ModelConfigError, match="not both"):
        RunnerConfig("x", kv_num_tokens=10, mem_fraction=0.5)
    with pytest.raises(ModelConfigError, match="attention_backend"):
        RunnerConfig("x", attention_backend="sdpa")
    with pytest.raises(ModelConfigError, match="dtype"):
        RunnerConfig("x", dtype="int8")
    runner = ModelRunner(
        RunnerConfig(tiny_model_path("llama"), device="cpu", kv_num_tokens=32, max_context_len=64)
    )
    assert runner.num_kv_slots == 32 and runner.dtype == torch.float32
    row = 1
    with pytest.raises(BatchError, match="KV slot outside"):
        runner.extend_batch([req(row, 0, 2, first_slot=32)])
    with pytest.raises(BatchError, match="vocabulary"):
        runner.decode_batch([row], [runner.vocab_size], [1], [1])
