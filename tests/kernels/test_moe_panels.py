"""The rust expert kernel (`sglr.kernels.moe_panels`, rust/kernels' moe) against a token-by-token
reference, its panel layout, where it applies, and `expert_mlp` choosing it only for a few
tokens per expert."""

from __future__ import annotations

import pytest
import torch

from sglr.kernels import moe_grouped
from sglr.kernels.cpu_linear import pack_weight
from sglr.kernels.moe_grouped import PANEL_MAX_PAIRS_PER_EXPERT, CpuExperts, expert_mlp
from sglr.kernels.moe_panels import PANEL, pack_expert_panels, pack_panels, panel_expert_mlp
from sglr.kernels.reference import moe_experts_reference


def naive_experts(x, w13, w2, weights, expert_ids) -> torch.Tensor:
    """The reference in float64."""
    return moe_experts_reference(*(t.double() for t in (x, w13, w2, weights)), expert_ids)


def experts_case(
    num_tokens: int, top_k: int, seed: int, hidden: int = 32, inter: int = 24, num_experts: int = 5
):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    logits = torch.randn(num_tokens, num_experts, generator=gen)
    logits[:, 2] = -1e9  # expert 2 gets no token: an empty run
    probs = torch.softmax(logits, dim=-1)
    weights, expert_ids = torch.topk(probs, top_k, dim=-1)
    return x, w13, w2, weights, expert_ids


# 1 token; 9 tokens x top-3 over 4 experts (~7 rows each, two passes); 40 x top-2 (three passes).
@pytest.mark.parametrize(("num_tokens", "top_k"), [(1, 1), (9, 3), (40, 2)])
def test_kernel_equals_token_by_token_reference(num_tokens: int, top_k: int) -> None:
    x, w13, w2, weights, expert_ids = experts_case(num_tokens, top_k, seed=num_tokens)
    panels = pack_expert_panels(w13, w2)
    assert panels is not None
    got = panel_expert_mlp(x, weights, expert_ids, panels)
    assert got.dtype == torch.float32 and got.shape == x.shape
    expected = naive_experts(x, w13, w2, weights, expert_ids).float()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_kernel_splits_over_threads_without_changing_a_bit() -> None:
    # Enough multiply-adds (~4M per phase) for the kernel to use several threads.
    x, w13, w2, weights, expert_ids = experts_case(64, 2, seed=5, hidden=128, inter=128, num_experts=6)
    panels = pack_expert_panels(w13, w2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = panel_expert_mlp(x, weights, expert_ids, panels)
        torch.set_num_threads(4)
        four = panel_expert_mlp(x, weights, expert_ids, panels)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, four)
    torch.testing.assert_close(
        one, naive_experts(x, w13, w2, weights, expert_ids).float(), atol=1e-5, rtol=1e-5
    )


def test_panels_hold_each_value_at_its_place() -> None:
    weights = torch.arange(2 * (2 * PANEL) * 3, dtype=torch.float32).reshape(2, 2 * PANEL, 3)
    packed = pack_panels(weights)
    assert packed.shape == (2, 2, 3, PANEL) and packed.is_contiguous()
    for e in range(2):
        for n in range(2 * PANEL):
            for k in range(3):
                assert packed[e, n // PANEL, k, n % PANEL] == weights[e, n, k]


def test_kernel_applies_to_float32_experts_of_panel_sizes_only() -> None:
    w13, w2 = torch.randn(2, 2 * 24, 32), torch.randn(2, 32, 24)
    assert pack_expert_panels(w13, w2) is not None
    assert pack_expert_panels(w13.bfloat16(), w2.bfloat16()) is None
    assert pack_expert_panels(torch.randn(2, 2 * 12, 32), torch.randn(2, 32, 12)) is None  # 2I = 24
    assert pack_expert_panels(torch.randn(2, 2 * 24, 40), torch.randn(2, 40, 24)) is None  # H = 40


def test_kernel_rejects_mismatched_inputs() -> None:
    x, w13, w2, weights, expert_ids = experts_case(4, 2, seed=1)
    panels = pack_expert_panels(w13, w2)
    with pytest.raises(ValueError, match="expert id 7"):
        panel_expert_mlp(x, weights, torch.full_like(expert_ids, 7), panels)
    with pytest.raises(ValueError, match="hidden"):
        panel_expert_mlp(x[:, :16], weights, expert_ids, panels)


def test_expert_mlp_runs_the_kernel_for_few_pairs_per_expert_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def spy(hidden, topk_weights, topk_ids, panels):
        calls.append(hidden.shape[0])
        return panel_expert_mlp(hidden, topk_weights, topk_ids, panels)

    monkeypatch.setattr(moe_grouped, "panel_expert_mlp", spy)
    num_experts, top_k = 5, 2
    few = PANEL_MAX_PAIRS_PER_EXPERT * num_experts // top_k
    for num_tokens in (few, few + 1):
        x, w13, w2, weights, expert_ids = experts_case(num_tokens, top_k, seed=num_tokens)
        cpu = CpuExperts(
            [(pack_weight(a), pack_weight(b)) for a, b in zip(w13, w2, strict=True)],
            pack_expert_panels(w13, w2),
        )
        got = expert_mlp(x, w13, w2, weights, expert_ids, cpu)
        torch.testing.assert_close(
            got, naive_experts(x, w13, w2, weights, expert_ids).float(), atol=1e-5, rtol=1e-5
        )
    assert calls == [few]
    monkeypatch.setenv("SGLR_CPU_MOE_KERNEL", "0")
    expert_mlp(x[:1], w13, w2, weights[:1], expert_ids[:1], cpu)
    assert calls == [few]
