"""Sliding-window and soft-capped attention (`AttentionVariant`) in every CPU backend against the
reference, plus the typed error of a backend that cannot compute a variant."""

from __future__ import annotations

import pytest
import torch
from paged_case import make_case

from sglr.errors import UnsupportedAttentionError
from sglr.kernels.attention import create_attention_backend
from sglr.kernels.attention_backend import AttentionBackend
from sglr.kernels.attention_variant import AttentionVariant
from sglr.kernels.reference import extend_attention_reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CASES = [
    ([0], [23], False),  # a lone fresh prompt (the torch backend's mask-free path)
    ([0, 11, 30, 2], [6, 3, 9, 1], False),  # windows reaching into, and past, cached prefixes
    ([20, 0, 7, 1, 70], [1, 1, 1, 1, 1], True),
]
VARIANTS = [
    AttentionVariant(0.3, sliding_window=4),
    AttentionVariant(0.3, sliding_window=1),  # each query sees only itself
    AttentionVariant(0.7, logit_softcap=0.8),
    AttentionVariant(0.7, sliding_window=5, logit_softcap=0.8),
]


@pytest.mark.parametrize("backend_name", ["torch", "triton"])
@pytest.mark.parametrize(("prefix_lens", "extend_lens", "decode"), CASES)
@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_variant_matches_reference(backend_name, prefix_lens, extend_lens, decode, variant) -> None:
    case = make_case(prefix_lens, extend_lens, 4, 2, 16, decode=decode, device=DEVICE)
    # Layer 0 plain, layer 1 the variant: the backend must pick each layer's own.
    plain = AttentionVariant(case.scale)
    backend = create_attention_backend(backend_name, case.kv_cache, case.table, case.scale, [variant, plain])
    backend.begin(case.batch)
    out = backend.forward(0, case.q, case.k, case.v)
    rows = case.batch.req_rows_cpu.tolist()
    cache = (case.kv_cache.k_cache(0), case.kv_cache.v_cache(0))
    expected = extend_attention_reference(
        case.q, *cache, case.table, rows, prefix_lens, extend_lens, variant.scale,
        variant.sliding_window, variant.logit_softcap,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)
    plain_expected = extend_attention_reference(
        case.q, *cache, case.table, rows, prefix_lens, extend_lens, case.scale
    )
    assert not torch.allclose(expected, plain_expected, atol=1e-3), "the variant changes nothing here"


class _PlainOnly(AttentionBackend):
    name = "plain-only"
    supports_cuda_graph = False

    def forward(self, layer_id, q, k, v):  # pragma: no cover - never reached
        raise NotImplementedError


@pytest.mark.parametrize(
    ("variant", "feature"),
    [
        (AttentionVariant(1.0, sliding_window=8), "sliding-window"),
        (AttentionVariant(1.0, logit_softcap=5.0), "soft-capping"),
    ],
)
def test_backend_without_a_feature_refuses_it_when_built(variant, feature) -> None:
    case = make_case([0], [2])
    with pytest.raises(UnsupportedAttentionError, match=feature):
        _PlainOnly(case.kv_cache, case.table, case.scale, [AttentionVariant(1.0), variant])
    _PlainOnly(case.kv_cache, case.table, case.scale, [AttentionVariant(1.0)])  # plain layers are fine
