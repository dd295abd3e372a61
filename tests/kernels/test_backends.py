"""Attention backends (one interface) against the reference, in extend and decode mode."""

from __future__ import annotations

import pytest
import torch
from paged_case import make_case

from sglr.errors import ModelError
from sglr.kernels.attention import create_attention_backend, resolve_backend_name
from sglr.kernels.reference import extend_attention_reference

BACKENDS = ["torch", "triton"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize(
    ("prefix_lens", "extend_lens", "decode"),
    [
        ([0, 11, 4], [6, 3, 1], False),
        ([20, 0, 7, 1], [1, 1, 1, 1], True),
    ],
)
def test_backend_matches_reference(backend_name, prefix_lens, extend_lens, decode) -> None:
    case = make_case(
        prefix_lens, extend_lens, num_heads=4, num_kv_heads=2, head_dim=16, decode=decode, device=DEVICE
    )
    backend = create_attention_backend(backend_name, case.kv_cache, case.table, case.scale)
    backend.begin(case.batch)
    out = backend.forward(0, case.q, case.k, case.v)
    # The backend stored this step's K/V; the reference reads everything from the cache.
    assert torch.equal(case.kv_cache.k_cache(0)[case.batch.out_cache_slots], case.k)
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), prefix_lens, extend_lens, case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("prefix_len", "extend_len", "decode"), [(0, 9, False), (13, 4, False), (21, 1, True)]
)
@pytest.mark.parametrize("consecutive", [True, False])
def test_torch_backend_reads_a_lone_requests_consecutive_slots_as_a_view(
    prefix_len, extend_len, decode, consecutive
) -> None:
    """One request on consecutive slots: K/V are a slice of the cache (no gather), same result."""
    case = make_case([prefix_len], [extend_len], decode=decode, device="cpu", consecutive_slots=consecutive)
    backend = create_attention_backend("torch", case.kv_cache, case.table, case.scale)
    backend.use_cpu_decode_kernel = False  # decode's SDPA path (the kernel has no groups)
    backend.begin(case.batch)
    assert (backend._groups[0].kv_start is not None) == consecutive
    out = backend.forward(0, case.q, case.k, case.v)
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), [prefix_len], [extend_len], case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


def test_auto_backend_on_cpu_is_torch() -> None:
    assert resolve_backend_name("auto", torch.device("cpu")) == "torch"


def test_unknown_or_unavailable_backend_is_a_clear_error() -> None:
    with pytest.raises(ModelError, match="unknown attention backend"):
        resolve_backend_name("xformers", torch.device("cpu"))
    with pytest.raises(ModelError, match="flashinfer"):
        resolve_backend_name("flashinfer", torch.device("cpu"))


@pytest.mark.gpu
def test_flashinfer_backend_matches_reference() -> None:
    pytest.importorskip("flashinfer", reason="flashinfer is an optional dependency")
    for prefix_lens, extend_lens, decode in (([0, 11, 4], [6, 3, 1], False), ([20, 0, 7], [1, 1, 1], True)):
        case = make_case(
            prefix_lens, extend_lens, 8, 2, 64, dtype=torch.bfloat16, decode=decode, device="cuda"
        )
        backend = create_attention_backend("flashinfer", case.kv_cache, case.table, case.scale)
        backend.begin(case.batch)
        out = backend.forward(0, case.q, case.k, case.v)
        expected = extend_attention_reference(
            case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
            case.batch.req_rows_cpu.tolist(), prefix_lens, extend_lens, case.scale,
        )  # fmt: skip
        torch.testing.assert_close(out.float(), expected.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("decode", [False, True])
def test_torch_backend_splits_ragged_batches_into_groups_correctly(decode: bool, monkeypatch) -> None:
    """Ragged batches attended in several padded groups give the reference result."""
    import sglr.kernels.torch_backend as torch_backend

    # Small shapes never pay for a second group: make any padding start one.
    monkeypatch.setattr(torch_backend, "_GROUP_OVERHEAD_CELLS", 0)
    monkeypatch.setattr(torch_backend, "_MAX_PADDING_FACTOR", 1)
    rng = torch.Generator().manual_seed(11)
    prefix_lens = torch.randint(0, 90, (37,), generator=rng).tolist()
    extend_lens = [1] * 37 if decode else torch.randint(1, 12, (37,), generator=rng).tolist()
    case = make_case(
        prefix_lens, extend_lens, num_heads=4, num_kv_heads=2, head_dim=16, decode=decode, device=DEVICE
    )
    backend = create_attention_backend("torch", case.kv_cache, case.table, case.scale)
    backend.use_cpu_decode_kernel = False  # the SDPA path's groups (the CPU kernel has none)
    backend.begin(case.batch)
    assert len(backend._groups) > 1
    out = backend.forward(0, case.q, case.k, case.v)
    expected = extend_attention_reference(
        case.q, case.kv_cache.k_cache(0), case.kv_cache.v_cache(0), case.table,
        case.batch.req_rows_cpu.tolist(), prefix_lens, extend_lens, case.scale,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)


def test_partition_keeps_a_long_prompt_apart_from_short_extends() -> None:
    """One long prefill batched with many short cached-prefix extends must not pad them all."""
    import numpy as np

    from sglr.kernels.torch_backend import _GROUP_OVERHEAD_CELLS, partition_by_padding

    extend_lens = np.array([1070] + [40] * 13)
    seq_lens = np.array([1070] + [1064] * 13)
    groups = partition_by_padding(extend_lens, seq_lens)
    assert sorted(int(i) for g in groups for i in g) == list(range(14))
    padded = sum(len(g) * extend_lens[g].max() * seq_lens[g].max() for g in groups)
    real = int((extend_lens * seq_lens).sum())
    assert padded <= 2 * real + len(groups) * _GROUP_OVERHEAD_CELLS
    assert len(groups) >= 2
    # Uniform batches stay one group.
    assert len(partition_by_padding(np.full(20, 8), np.full(20, 100))) == 1
