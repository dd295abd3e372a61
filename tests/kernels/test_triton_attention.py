"""Triton store-KV, extend and decode kernels against the loop-per-request reference.

On machines without CUDA they run in the Triton interpreter (see conftest.py), so shapes stay
small; on a GPU the same tests run the compiled kernels.
"""

from __future__ import annotations

import pytest
import torch
from paged_case import make_case

from sglr.kernels.reference import decode_attention_reference, extend_attention_reference
from sglr.kernels.triton_decode import MAX_NUM_KV_SPLITS, DecodeTuning, decode_attention, splits_to_fill
from sglr.kernels.triton_extend import extend_attention
from sglr.kernels.triton_store_kv import store_kv

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_store_kv_scatters_rows_to_their_slots() -> None:
    case = make_case([3, 0], [4, 2], num_kv_heads=2, head_dim=24, device=DEVICE)
    slots = case.batch.out_cache_slots
    untouched = torch.ones(case.kv_cache.k_buffer.shape[1], dtype=torch.bool, device=DEVICE)
    untouched[slots] = False
    before = case.kv_cache.k_buffer[0][untouched].clone()
    store_kv(case.k, case.v, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), slots)
    assert torch.equal(case.kv_cache.k_cache(0)[slots], case.k)
    assert torch.equal(case.kv_cache.v_cache(0)[slots], case.v)
    assert torch.equal(case.kv_cache.k_buffer[0][untouched], before)


def test_store_kv_rejects_non_contiguous_rows() -> None:
    case = make_case([0], [4], device=DEVICE)
    k = case.k.transpose(1, 2).contiguous().transpose(1, 2)  # same shape, heads not contiguous
    with pytest.raises(ValueError, match="contiguous"):
        store_kv(k, case.v, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.batch.out_cache_slots)


EXTEND_CASES = [
    # prefix_lens, extend_lens, Hq, Hkv, D
    ([0], [5], 2, 2, 16),
    ([0, 9, 33], [7, 1, 12], 4, 2, 16),  # fresh prompt, one-token extend, long prefix; GQA 2
    ([70, 3], [66, 2], 4, 1, 32),  # extend spans two query blocks and prefix > one key block; GQA 4
    ([5, 0], [3, 4], 3, 3, 24),  # head_dim not a power of two
    ([4], [3], 2, 1, 8),  # head_dim below the 16-wide dot tile
]


@pytest.mark.parametrize(
    ("prefix_lens", "extend_lens", "num_heads", "num_kv_heads", "head_dim"), EXTEND_CASES
)
def test_extend_matches_reference(prefix_lens, extend_lens, num_heads, num_kv_heads, head_dim) -> None:
    case = make_case(
        prefix_lens, extend_lens, num_heads, num_kv_heads, head_dim, seed=len(prefix_lens), device=DEVICE
    )
    case.store_new_kv()
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), prefix_lens, extend_lens, case.scale,
    )  # fmt: skip
    b = case.batch
    out = extend_attention(
        case.q, case.k, case.v, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        b.req_rows, b.prefix_lens, b.extend_lens, b.extend_starts, b.max_extend_len, case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


def test_extend_in_half_precision_matches_reference() -> None:
    case = make_case([6, 0], [5, 9], 4, 2, 16, dtype=torch.float16, seed=3, device=DEVICE)
    case.store_new_kv()
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), [6, 0], [5, 9], case.scale,
    )  # fmt: skip
    b = case.batch
    out = extend_attention(
        case.q, case.k, case.v, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        b.req_rows, b.prefix_lens, b.extend_lens, b.extend_starts, b.max_extend_len, case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out.float(), expected.float(), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize(
    ("seq_lens", "num_splits", "num_heads", "num_kv_heads", "head_dim"),
    [
        ([1], 1, 2, 2, 16),
        ([1, 5, 40], 4, 4, 2, 16),  # fewer tokens than splits, and splits longer than one block
        ([130, 2, 17], 8, 8, 2, 32),  # GQA 4, sequences over two key blocks
        ([9, 64], 3, 3, 1, 24),  # GQA 3 (not a power of two), head_dim 24
        ([67, 300, 3], 8, 4, 2, 16),  # splits rounded up to whole key blocks: later ones empty
        ([200, 1], 32, 2, 1, 16),  # more splits than key blocks
        ([150, 20], None, 4, 2, 16),  # the split count chosen for the device
        ([70, 3, 129], 1, 8, 2, 32),  # one split: the split kernel writes the output, no merge
    ],
)
def test_decode_matches_reference(seq_lens, num_splits, num_heads, num_kv_heads, head_dim) -> None:
    case = make_case(
        [n - 1 for n in seq_lens],
        [1] * len(seq_lens),
        num_heads,
        num_kv_heads,
        head_dim,
        decode=True,
        device=DEVICE,
    )
    case.store_new_kv()
    expected = decode_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), seq_lens, case.scale,
    )  # fmt: skip
    out = decode_attention(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows, case.batch.seq_lens, case.scale, num_kv_splits=num_splits,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("tuning", "num_splits"),
    [
        (DecodeTuning(block_n=16, num_warps=2, num_stages=1), 3),  # blocks shorter than the splits
        (DecodeTuning(block_n=128, num_warps=8, num_stages=3), 2),  # one block covers a split
        (DecodeTuning(block_n=32), 1),
    ],
)
def test_decode_tunables_keep_the_result(tuning, num_splits) -> None:
    seq_lens = [150, 1, 41]
    case = make_case([n - 1 for n in seq_lens], [1] * 3, 8, 2, 32, decode=True, device=DEVICE, seed=5)
    case.store_new_kv()
    expected = decode_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), seq_lens, case.scale,
    )  # fmt: skip
    out = decode_attention(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows, case.batch.seq_lens, case.scale, num_kv_splits=num_splits, tuning=tuning,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


def test_split_count_fills_the_device_from_the_batch_size_alone() -> None:
    # An H200 has 132 multiprocessors: 8 programs each is 1,056 (request, KV head, split) programs.
    target = 8 * 132
    assert splits_to_fill(1 * 8, target) == MAX_NUM_KV_SPLITS  # batch 1, 8 KV heads: capped
    assert splits_to_fill(64 * 8, target) == 4
    assert splits_to_fill(132, target) == 8
    assert splits_to_fill(256 * 8, target) == 1  # enough requests: no split, no merge work
    for num_pairs in range(1, 3000, 37):
        splits = splits_to_fill(num_pairs, target)
        assert splits == MAX_NUM_KV_SPLITS or num_pairs * splits >= target
        assert splits == 1 or num_pairs * (splits // 2) < target
