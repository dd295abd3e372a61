"""The fused Triton MoE kernels against the torch grouped-by-expert path (interpreted on CPU
without CUDA, so shapes stay small; compiled on a GPU)."""

from __future__ import annotations

import pytest
import torch

from sglr.kernels.moe_grouped import grouped_expert_mlp
from sglr.kernels.triton_moe import align_pairs_by_expert, fused_expert_mlp

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_alignment_gives_each_block_one_expert_and_every_pair_once() -> None:
    topk_ids = torch.tensor([[2, 0], [2, 1], [0, 2], [2, 3], [1, 2]], device=DEVICE)
    sorted_pair_ids, block_expert_ids = align_pairs_by_expert(topk_ids, num_experts=5, block_m=4)
    num_pairs = topk_ids.numel()
    flat = topk_ids.reshape(-1).tolist()
    rows = sorted_pair_ids.tolist()
    real = [p for p in rows if p < num_pairs]
    assert sorted(real) == list(range(num_pairs))
    for block, expert in enumerate(block_expert_ids.tolist()):
        pairs = [p for p in rows[block * 4 : block * 4 + 4] if p < num_pairs]
        if expert == 5:  # past the last run: padding only
            assert not pairs
        else:
            assert pairs and all(flat[p] == expert for p in pairs)
    # expert 2 has 5 pairs: two blocks; experts 0, 1, 3 one each; expert 4 none.
    assert [e for e in block_expert_ids.tolist() if e < 5] == [0, 1, 2, 2, 3]


CASES = [
    # tokens, hidden, intermediate, experts, top_k
    (1, 32, 32, 4, 2),  # one decode token
    (21, 48, 40, 6, 2),  # ragged: hidden and intermediate not multiples of the tiles
    (37, 64, 96, 8, 3),  # more tokens than one row block per expert
    (5, 16, 24, 3, 1),  # top-1
    (100, 16, 24, 3, 1),  # many rows per expert: 64-row blocks
]


@pytest.mark.parametrize(("num_tokens", "hidden", "inter", "num_experts", "top_k"), CASES)
def test_fused_experts_match_the_grouped_torch_path(num_tokens, hidden, inter, num_experts, top_k) -> None:
    gen = torch.Generator().manual_seed(num_tokens)
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    probs = torch.randn(num_tokens, num_experts, generator=gen).softmax(-1)
    weights, expert_ids = probs.topk(top_k, dim=-1)
    expected = grouped_expert_mlp(x, w13, w2, weights, expert_ids)
    got = fused_expert_mlp(*(t.to(DEVICE) for t in (x, w13, w2, weights, expert_ids)))
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fused_experts_in_bf16_on_gpu() -> None:
    gen = torch.Generator().manual_seed(0)
    num_tokens, hidden, inter, num_experts, top_k = 300, 256, 512, 8, 2
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    weights, expert_ids = torch.randn(num_tokens, num_experts, generator=gen).softmax(-1).topk(top_k, dim=-1)
    expected = grouped_expert_mlp(x, w13, w2, weights, expert_ids)
    args = [t.cuda().to(torch.bfloat16) for t in (x, w13, w2)]
    got = fused_expert_mlp(*args, weights.cuda(), expert_ids.cuda())
    torch.testing.assert_close(got.float().cpu(), expected, atol=5e-2, rtol=5e-2)
