"""The CPU RMSNorm kernel (`kernels/cpu_norm.py`, rust/kernels' norm) against torch's path, and where
it applies."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sglr.kernels import cpu_norm
from sglr.model.layers import RMSNorm


def _reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The reference implementations' rounding: fp32 normalize, cast, times the weight."""
    normed = F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)
    return weight * normed


@pytest.mark.parametrize("shape", [(1, 576), (3, 64), (2, 5, 128), (64, 33)])
def test_kernel_matches_the_reference_rounding(shape) -> None:
    gen = torch.Generator().manual_seed(len(shape) * 100 + shape[-1])
    x32 = torch.randn(shape, generator=gen) * 3
    w32 = torch.randn(shape[-1], generator=gen)
    got = cpu_norm.rms_norm(x32, w32, 1e-5)
    torch.testing.assert_close(got, _reference(x32, w32, 1e-5), rtol=2e-6, atol=1e-6)
    x16, w16 = x32.bfloat16(), w32.bfloat16()
    got16, want16 = cpu_norm.rms_norm(x16, w16, 1e-5), _reference(x16, w16, 1e-5)
    assert got16.dtype == torch.bfloat16 and got16.shape == x16.shape
    # Both round twice; only a mean square that lands on a rounding boundary could differ.
    same = (got16 == want16).float().mean().item()
    assert same > 0.995, same
    torch.testing.assert_close(got16.float(), want16.float(), rtol=2**-7, atol=0)


def test_module_uses_the_kernel_for_few_contiguous_rows_only(monkeypatch) -> None:
    calls = []
    real = cpu_norm.rms_norm
    monkeypatch.setattr(cpu_norm, "rms_norm", lambda *a: calls.append(a[0].shape) or real(*a))
    norm = RMSNorm(32, 1e-6, torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2, 32))
        few = torch.randn(4, 32).bfloat16()
        many = torch.randn(cpu_norm.CPU_NORM_MAX_ROWS + 1, 32).bfloat16()
        strided = torch.randn(32, 4).bfloat16().T
        for x in (few, many, strided):
            torch.testing.assert_close(
                norm(x).float(), _reference(x, norm.weight, 1e-6).float(), rtol=2**-7, atol=0
            )
    assert calls == [(4, 32)]
    assert not cpu_norm.kernel_applies(
        torch.randn(2, 8, dtype=torch.float16), torch.ones(8, dtype=torch.float16)
    )


def test_binding_refuses_mismatched_inputs() -> None:
    from sglr._core import rms_norm

    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="rms_norm"):
        rms_norm(x, np.ones(4, np.float32), 1e-5, np.empty_like(x))
    with pytest.raises(TypeError, match="int16"):
        rms_norm(x, np.ones(8, np.float64), 1e-5, np.empty_like(x))
