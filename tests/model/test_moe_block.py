"""The MoE block's parts against naive references: top-k routing (with and without
renormalization), the expert computation grouped by expert, the MoE config fields, and loading
expert weights from per-expert and stacked checkpoint tensors."""

from __future__ import annotations

import pytest
import torch

from sglr.errors import CheckpointError, ModelConfigError
from sglr.kernels.cpu_linear import pack_weight
from sglr.kernels.moe_grouped import grouped_expert_mlp
from sglr.kernels.reference import moe_experts_reference
from sglr.model.config import ModelConfig, read_moe_config
from sglr.model.moe import FusedExperts, load_moe_weights, route_tokens
from sglr.model.parallel import check_tensor_parallel


def naive_route(logits: torch.Tensor, top_k: int, renormalize: bool) -> list[list[tuple[int, float]]]:
    """Per token: (expert, weight) of the top_k highest softmax probabilities."""
    routes = []
    for row in logits.tolist():
        total = sum(torch.tensor(row).exp().tolist())
        probs = [(expert, float(torch.tensor(v).exp()) / total) for expert, v in enumerate(row)]
        best = sorted(probs, key=lambda p: -p[1])[:top_k]
        norm = sum(w for _, w in best) if renormalize else 1.0
        routes.append([(expert, w / norm) for expert, w in best])
    return routes


@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_routing_picks_the_top_k_experts_with_their_probabilities(top_k: int, renormalize: bool) -> None:
    logits = torch.randn(17, 6, generator=torch.Generator().manual_seed(top_k))
    weights, expert_ids = route_tokens(logits, top_k, renormalize)
    assert weights.dtype == torch.float32 and expert_ids.shape == (17, top_k)
    for got_w, got_ids, expected in zip(
        weights.tolist(), expert_ids.tolist(), naive_route(logits, top_k, renormalize), strict=True
    ):
        assert got_ids == [expert for expert, _ in expected]
        assert got_w == pytest.approx([w for _, w in expected], abs=1e-6)
    sums = weights.sum(-1)
    if renormalize:
        torch.testing.assert_close(sums, torch.ones(17))
    elif top_k < 6:
        assert bool((sums < 1 - 1e-3).all())


def test_grouped_experts_equal_token_by_token_reference() -> None:
    gen = torch.Generator().manual_seed(0)
    num_tokens, hidden, inter, num_experts, top_k = 23, 16, 12, 5, 2
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    # Expert 3 gets no token at all: its run is empty.
    logits = torch.randn(num_tokens, num_experts, generator=gen)
    logits[:, 3] = -1e9
    weights, expert_ids = route_tokens(logits, top_k, renormalize=False)
    got = grouped_expert_mlp(x, w13, w2, weights, expert_ids)
    torch.testing.assert_close(
        got, moe_experts_reference(x, w13, w2, weights, expert_ids), atol=1e-5, rtol=1e-5
    )


def mixtral_raw(**extra) -> dict:
    return {
        "architectures": ["MixtralForCausalLM"], "vocab_size": 512, "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_local_experts": 4, "num_experts_per_tok": 2, **extra,
    }  # fmt: skip


def test_mixtral_sliding_window_applies_to_every_layer() -> None:
    assert ModelConfig.from_dict(mixtral_raw(sliding_window=None)).family.layer_windows == ()
    config = ModelConfig.from_dict(mixtral_raw(sliding_window=4096))
    assert config.moe.norm_topk_prob
    assert config.family.layer_windows == (4096,) * 4


def test_qwen_moe_window_is_off_unless_use_sliding_window() -> None:
    raw = mixtral_raw(architectures=["Qwen3MoeForCausalLM"], num_experts=4, moe_intermediate_size=16)
    assert ModelConfig.from_dict({**raw, "sliding_window": 4096}).family.layer_windows == ()
    on = {**raw, "sliding_window": 64, "use_sliding_window": True, "max_window_layers": 2}
    assert ModelConfig.from_dict(on).family.layer_windows == (None, None, 64, 64)


def test_qwen2_moe_dense_layers_follow_sparse_step_and_mlp_only_layers() -> None:
    raw = mixtral_raw(
        architectures=["Qwen2MoeForCausalLM"], num_experts=4, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, decoder_sparse_step=2, mlp_only_layers=[3],
    )  # fmt: skip
    config = ModelConfig.from_dict(raw)
    assert config.attention_bias  # qkv_bias defaults to true
    assert [config.moe.is_sparse_layer(i) for i in range(4)] == [False, True, False, False]
    assert not config.moe.norm_topk_prob
    with pytest.raises(ModelConfigError, match="num_experts_per_tok"):
        read_moe_config({**raw, "num_experts_per_tok": 5}, "Qwen2MoeForCausalLM")
    with pytest.raises(ModelConfigError, match="shared_expert_intermediate_size"):
        read_moe_config(
            {k: v for k, v in raw.items() if k != "shared_expert_intermediate_size"}, "Qwen2MoeForCausalLM"
        )


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.experts = FusedExperts(3, 4, 6, torch.float32, tp=None)


def test_per_expert_and_stacked_checkpoint_tensors_load_the_same_weights() -> None:
    gen = torch.Generator().manual_seed(1)
    gate_up = torch.randn(3, 12, 4, generator=gen)
    down = torch.randn(3, 4, 6, generator=gen)
    per_expert = []
    for e in range(3):
        gate, up = gate_up[e].chunk(2)
        per_expert += [(f"experts.{e}.w1.weight", gate), (f"experts.{e}.w3.weight", up)]
        per_expert.append((f"experts.{e}.w2.weight", down[e]))
    model = torch.nn.Module()
    model.block = _Block()
    load_moe_weights(model, [(f"block.{n}", t) for n, t in per_expert])
    torch.testing.assert_close(model.block.experts.w13.data, gate_up)
    torch.testing.assert_close(model.block.experts.w2.data, down)
    stacked = torch.nn.Module()
    stacked.block = _Block()
    load_moe_weights(stacked, [("block.experts.gate_up_proj", gate_up), ("block.experts.down_proj", down)])
    torch.testing.assert_close(stacked.block.experts.w13.data, gate_up)
    torch.testing.assert_close(stacked.block.experts.w2.data, down)
    with pytest.raises(CheckpointError, match=r"lacks 1 expert weights: block\.experts\.2\.down"):
        load_moe_weights(model, [(f"block.{n}", t) for n, t in per_expert[:-1]])


def test_prepacked_cpu_expert_weights_give_the_same_outputs() -> None:
    gen = torch.Generator().manual_seed(2)
    num_tokens, hidden, inter, num_experts = 40, 32, 24, 4
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    weights, expert_ids = route_tokens(torch.randn(num_tokens, num_experts, generator=gen), 2, True)
    packs = [(pack_weight(a), pack_weight(b)) for a, b in zip(w13, w2, strict=True)]
    plain = grouped_expert_mlp(x, w13, w2, weights, expert_ids)
    packed = grouped_expert_mlp(x, w13, w2, weights, expert_ids, packs)
    torch.testing.assert_close(packed, plain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        packed, moe_experts_reference(x, w13, w2, weights, expert_ids), atol=1e-5, rtol=1e-5
    )


def test_tensor_parallel_check_covers_expert_sizes() -> None:
    raw = mixtral_raw(
        architectures=["Qwen2MoeForCausalLM"], num_experts=4, moe_intermediate_size=16,
        shared_expert_intermediate_size=6,
    )  # fmt: skip
    config = ModelConfig.from_dict(raw)
    check_tensor_parallel(config, 2)  # 48, 16 and 6 all split over 2 ranks
    with pytest.raises(ModelConfigError, match="expert intermediate size 6 "):
        check_tensor_parallel(config, 4)  # 48 and 16 split over 4, the shared expert's 6 does not
