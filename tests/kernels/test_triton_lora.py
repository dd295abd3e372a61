"""The Triton LoRA kernel (segmented shrink and expand, `kernels/triton_lora.py`) against the
same deltas computed adapter by adapter in torch, under TRITON_INTERPRET=1 on the CPU: a batch
mixing the base model (left untouched) and adapters of ranks 4, 8 and 16 in any row order. The
tolerance is the fp32 torch path's own error against float64, measured here."""

from __future__ import annotations

import pytest
import torch

from sglr.kernels.triton_lora import add_lora_deltas, padded_rank

IN_FEATURES, OUT_FEATURES = 96, 80


def stacked(ranks: list[int], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, list]:
    """Stacked, zero-padded weights and each adapter's own (shrink [r, in], expand [out, r])."""
    width = padded_rank(max(ranks))
    shrink = torch.zeros(len(ranks), width, IN_FEATURES)
    expand = torch.zeros(len(ranks), OUT_FEATURES, width)
    pairs = []
    for slot, rank in enumerate(ranks):
        a = torch.randn(rank, IN_FEATURES, generator=generator) / IN_FEATURES**0.5
        b = torch.randn(OUT_FEATURES, rank, generator=generator) / rank**0.5
        shrink[slot, :rank], expand[slot, :, :rank] = a, b
        pairs.append((a, b))
    return shrink, expand, pairs


def reference(x: torch.Tensor, y: torch.Tensor, pairs: list, row_slots: torch.Tensor, dtype) -> torch.Tensor:
    out = y.to(dtype).clone()
    for slot, (a, b) in enumerate(pairs):
        rows = (row_slots == slot).nonzero().flatten()
        out[rows] += (x[rows].to(dtype) @ a.to(dtype).T) @ b.to(dtype).T
    return out


@pytest.mark.parametrize("num_rows", [1, 7, 45])
def test_mixed_batch_matches_per_adapter_deltas(num_rows: int) -> None:
    generator = torch.Generator().manual_seed(num_rows)
    ranks = [4, 8, 16]
    shrink, expand, pairs = stacked(ranks, generator)
    x = torch.randn(num_rows, IN_FEATURES, generator=generator)
    y = torch.randn(num_rows, OUT_FEATURES, generator=generator)
    row_slots = torch.randint(0, len(ranks) + 1, (num_rows,), generator=generator)  # len(ranks): base
    exact = reference(x, y, pairs, row_slots, torch.float64)
    torch_error = (reference(x, y, pairs, row_slots, torch.float32).double() - exact).abs().max().item()
    out = add_lora_deltas(x, y.clone(), shrink, expand, row_slots)
    assert (out.double() - exact).abs().max().item() <= 8 * torch_error + 1e-6
    base_rows = row_slots == len(ranks)
    assert torch.equal(out[base_rows], y[base_rows])  # the base model's rows are untouched


def test_bad_shapes_are_refused() -> None:
    x, y = torch.zeros(2, IN_FEATURES), torch.zeros(2, OUT_FEATURES)
    with pytest.raises(ValueError, match="do not fit"):
        add_lora_deltas(
            x,
            y,
            torch.zeros(1, 8, IN_FEATURES),
            torch.zeros(1, OUT_FEATURES, 8),
            torch.zeros(2, dtype=torch.int64),
        )
