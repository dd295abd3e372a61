"""Prepacked CPU weights (opt-in per module): the same products as `F.linear`, packed once, and
switched on for the newer families only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sglr.kernels.cpu_linear import pack_weight
from sglr.model.build import build_model
from sglr.model.config import ModelConfig
from sglr.model.layers import Linear, VocabParallelEmbedding


@pytest.mark.parametrize("bias", [True, False])
def test_prepacked_linear_equals_f_linear(bias: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    layer = Linear(24, (16, 8), bias=bias, dtype=torch.float32, shard_names=("a", "b"))
    layer.weight.data.copy_(torch.randn(24, 24, generator=gen))
    if bias:
        layer.bias.data.copy_(torch.randn(24, generator=gen))
    x = torch.randn(5, 24, generator=gen)
    plain = layer(x)
    layer.prepack_on_cpu = True
    packed = layer(x)
    torch.testing.assert_close(packed, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed, plain, atol=1e-5, rtol=1e-5)
    first_pack = layer._cpu_pack
    layer(x[:1])
    assert first_pack is not None and layer._cpu_pack is first_pack  # packed once


def test_prepacked_head_logits_equal_plain_logits() -> None:
    head = VocabParallelEmbedding(50, 16, torch.float32, tp=None)
    head.weight.data.copy_(torch.randn(50, 16, generator=torch.Generator().manual_seed(1)))
    hidden = torch.randn(3, 16)
    plain = head.logits(hidden)
    head.prepack_on_cpu = True
    torch.testing.assert_close(head.logits(hidden), plain, atol=1e-5, rtol=1e-5)


def _config(architecture: str, **extra) -> ModelConfig:
    raw = {
        "architectures": [architecture], "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_local_experts": 2, "num_experts_per_tok": 1,
        **extra,
    }  # fmt: skip
    return ModelConfig.from_dict(raw)


@pytest.mark.parametrize(
    ("architecture", "prepacked"),
    [("LlamaForCausalLM", False), ("Qwen3ForCausalLM", True), ("MixtralForCausalLM", True)],
)
def test_only_the_newer_families_prepack(architecture: str, prepacked: bool) -> None:
    model = build_model(_config(architecture), torch.float32, torch.device("cpu"), 64)
    flags = {m.prepack_on_cpu for m in model.modules() if isinstance(m, (Linear, VocabParallelEmbedding))}
    assert flags == {prepacked}


def test_prepacking_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    weight = torch.randn(8, 4)
    assert pack_weight(weight) is not None
    monkeypatch.setenv("SGLR_CPU_PREPACK", "0")
    assert pack_weight(weight) is None
    layer = Linear(4, 8, bias=False, dtype=torch.float32)
    layer.weight.data.copy_(weight)
    layer.prepack_on_cpu = True
    x = torch.randn(2, 4)
    torch.testing.assert_close(layer(x), F.linear(x, weight))  # the plain path, nothing packed
    assert layer._cpu_pack is None
