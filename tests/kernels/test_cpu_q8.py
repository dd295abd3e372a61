"""The 8-bit output head (`sglr.kernels.cpu_q8`, rust/kernels' Q8Matrix and its f32 kernel): the product and the row lookups
equal float64 math on the stored levels and scales, GGUF Q8_0 blocks read exactly, and an
embedding with a Q8 copy gives the dense path's logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from sglr.kernels.cpu_q8 import Q8_MAX_KERNEL_ROWS, Q8Weight, q8_linear, q8_rows
from sglr.model.gguf.q8_blocks import q8_0_levels_scales
from sglr.model.gguf.reader import GGUFTensor
from sglr.model.layers import VocabParallelEmbedding


def _random_q8(rng: np.random.Generator, rows: int, cols: int) -> Q8Weight:
    levels = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
    scales = rng.uniform(1e-3, 2e-2, size=(rows, cols // 32)).astype(np.float32)
    return Q8Weight(levels, scales)


def _dense(weight: Q8Weight) -> np.ndarray:
    return weight.levels.astype(np.float64) * np.repeat(weight.scales.astype(np.float64), 32, axis=1)


@pytest.mark.parametrize("num_rows", [1, 2, 5])
def test_q8_linear_matches_float64(num_rows: int) -> None:
    rng = np.random.default_rng(num_rows)
    weight = _random_q8(rng, 300, 96)
    x = torch.from_numpy(rng.standard_normal((num_rows, 96)).astype(np.float32))
    expected = x.double().numpy() @ _dense(weight).T
    got = q8_linear(x, weight).numpy()
    assert got.shape == (num_rows, 300) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_q8_rows_dequantize_exactly() -> None:
    rng = np.random.default_rng(7)
    weight = _random_q8(rng, 50, 64)
    row_ids = np.array([49, 0, 7, 7], dtype=np.int64)
    np.testing.assert_array_equal(
        q8_rows(weight, row_ids).numpy(), _dense(weight)[row_ids].astype(np.float32)
    )


def test_q8_weight_rejects_mismatched_scales() -> None:
    levels = np.zeros((4, 64), dtype=np.int8)
    with pytest.raises(ValueError, match="do not match"):
        Q8Weight(levels, np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="int8"):
        Q8Weight(levels.astype(np.int16), np.zeros((4, 2), dtype=np.float32))


def test_gguf_q8_0_blocks_read_as_levels_and_scales() -> None:
    rng = np.random.default_rng(3)
    dense = rng.standard_normal((6, 128)).astype(np.float32)
    blocks = quants.quantize(dense, GGMLQuantizationType.Q8_0)
    tensor = GGUFTensor("output.weight", GGMLQuantizationType.Q8_0, (6, 128), blocks)
    levels, scales = q8_0_levels_scales(tensor)
    expected = quants.dequantize(blocks, GGMLQuantizationType.Q8_0).reshape(6, 128)
    np.testing.assert_array_equal(_dense(Q8Weight(levels, scales)).astype(np.float32), expected)


def test_an_embedding_keeps_only_its_q8_rows() -> None:
    """Lookups give the dequantized rows; logits are the exact product for a row or two and
    within int8 activation rounding (~1% of the logits' scale) for more rows."""
    rng = np.random.default_rng(11)
    q8 = _random_q8(rng, 200, 64)
    dense = torch.from_numpy(_dense(q8))
    embedding = VocabParallelEmbedding(200, 64, torch.bfloat16, None)
    with pytest.raises(ValueError, match="Q8 head"):
        embedding.use_q8(_random_q8(rng, 100, 64))
    embedding.use_q8(q8)
    assert embedding.weight is None and [name for name, _ in embedding.named_parameters()] == []
    ids = torch.tensor([0, 199, 5, 5])
    looked_up = embedding(ids)
    assert looked_up.dtype == torch.bfloat16
    assert torch.equal(looked_up, dense[ids].to(torch.bfloat16))
    for num_rows in (1, Q8_MAX_KERNEL_ROWS, Q8_MAX_KERNEL_ROWS + 1, 9):
        hidden = torch.randn(num_rows, 64)
        expected = hidden.double() @ dense.T
        got = embedding.logits(hidden)
        assert got.shape == (num_rows, 200) and got.dtype == torch.float32
        atol = 1e-4 if num_rows <= Q8_MAX_KERNEL_ROWS else 0.01 * expected.abs().max().item()
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=atol)
