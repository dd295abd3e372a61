"""CPU decode attention through the Rust kernel (`kernels/cpu_decode.py`, rust/kernels' attn): the torch
backend's decode path on the CPU, against the reference and against its own SDPA path, for
fp32 and bf16 caches, GQA, ragged batches and sliding windows; soft-capped models keep SDPA."""

from __future__ import annotations

import pytest
import torch
from paged_case import make_case

from sglr.kernels import cpu_decode
from sglr.kernels.attention import create_attention_backend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.reference import extend_attention_reference


def _decode(case, variants=(), kernel=True) -> tuple[torch.Tensor, object]:
    backend = create_attention_backend("torch", case.kv_cache, case.table, case.scale, variants)
    backend.use_cpu_decode_kernel = kernel
    backend.begin(case.batch)
    return backend.forward(0, case.q, case.k, case.v), backend


@pytest.mark.parametrize(
    ("prefix_lens", "num_heads", "num_kv_heads", "head_dim"),
    [([20, 0, 7, 1], 4, 2, 16), ([300, 5], 9, 3, 64), ([1], 2, 2, 8), ([40, 41, 3], 8, 1, 32)],
)
def test_kernel_decode_matches_reference(prefix_lens, num_heads, num_kv_heads, head_dim) -> None:
    case = make_case(prefix_lens, [1] * len(prefix_lens), num_heads, num_kv_heads, head_dim, decode=True)
    out, backend = _decode(case)
    assert backend._cpu_decode is not None and backend._groups == []
    assert torch.equal(case.kv_cache.k_cache(0)[case.batch.out_cache_slots], case.k)
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), prefix_lens, [1] * len(prefix_lens), case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("window", [1, 5, 64])
def test_kernel_decode_with_a_sliding_window_equals_the_sdpa_path(window: int) -> None:
    case = make_case([30, 2, 11], [1, 1, 1], 6, 2, 16, decode=True, seed=window)
    variants = [AttentionVariant(case.scale, sliding_window=window)]
    kernel_out, _ = _decode(case, variants)
    sdpa_out, backend = _decode(case, variants, kernel=False)
    assert backend._cpu_decode is None
    torch.testing.assert_close(kernel_out, sdpa_out, atol=2e-5, rtol=1e-4)


def test_kernel_decode_on_a_bf16_cache_equals_the_sdpa_path() -> None:
    case = make_case([50, 9, 1], [1, 1, 1], 8, 2, 32, dtype=torch.bfloat16, decode=True, seed=4)
    kernel_out, _ = _decode(case)
    sdpa_out, _ = _decode(case, kernel=False)
    assert kernel_out.dtype == torch.bfloat16
    # Both round their output to bf16; the kernel's softmax runs in fp32 throughout.
    torch.testing.assert_close(kernel_out.float(), sdpa_out.float(), atol=2e-2, rtol=2e-2)


def test_soft_capped_or_half_precision_layers_stay_on_sdpa() -> None:
    plain, capped = AttentionVariant(0.1), AttentionVariant(0.1, logit_softcap=30.0)
    assert cpu_decode.supports(torch.bfloat16, [plain, plain])
    assert not cpu_decode.supports(torch.bfloat16, [plain, capped])
    assert not cpu_decode.supports(torch.float16, [plain])
    case = make_case([12, 3], [1, 1], decode=True)
    _, backend = _decode(case, [AttentionVariant(case.scale, logit_softcap=20.0)])
    assert backend._cpu_decode is None and backend._groups


def test_extend_batches_do_not_use_the_kernel() -> None:
    case = make_case([4, 0], [3, 5])
    _, backend = _decode(case)
    assert backend._cpu_decode is None


def test_store_kv_rows_writes_both_caches_and_refuses_bad_input() -> None:
    import numpy as np

    from sglr._core import store_kv_rows

    k_cache, v_cache = np.zeros((6, 2, 8), np.float32), np.zeros((6, 2, 8), np.float32)
    rows = np.arange(32, dtype=np.float32).reshape(2, 2, 8)
    store_kv_rows(k_cache, v_cache, rows, -rows, np.array([5, 2], np.int32))
    assert np.array_equal(k_cache[[5, 2]], rows) and np.array_equal(v_cache[[5, 2]], -rows)
    assert not k_cache[[0, 1, 3, 4]].any()
    with pytest.raises(ValueError, match="slot 6"):
        store_kv_rows(k_cache, v_cache, rows, rows, np.array([1, 6], np.int32))
    with pytest.raises(ValueError, match="do not match"):
        store_kv_rows(k_cache, v_cache, rows[:, :1], rows[:, :1], np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="int16"):
        store_kv_rows(k_cache, v_cache, rows.astype(np.float64), rows, np.array([1, 2], np.int32))
