"""A decoder layer's feed-forward module: the gated MLP (`down(act(gate(x)) * up(x))`, gate and
up fused into one matmul at load time) or, on a mixture-of-experts family's sparse layers, the
sparse MoE block (`sglr.model.moe`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sglr.errors import ModelConfigError
from sglr.model.config import ModelConfig
from sglr.model.layers import Linear
from sglr.model.moe import SparseMoeBlock
from sglr.model.parallel import TensorParallel, rank_and_size


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# `FamilyOptions.hidden_act` -> the activation.
ACTIVATIONS = {"silu": F.silu, "gelu_pytorch_tanh": _gelu_tanh}


class GatedMLP(torch.nn.Module):
    """Checkpoint names `gate_proj`, `up_proj` (fused into `gate_up_proj`), `down_proj`; under
    tensor parallelism each rank holds a slice of the intermediate dimension."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None) -> None:
        super().__init__()
        rank, num_ranks = rank_and_size(tp)
        if config.intermediate_size % num_ranks:
            raise ModelConfigError(
                f"intermediate_size {config.intermediate_size} does not split over tp_size={num_ranks}"
            )
        size = config.intermediate_size // num_ranks
        self.hidden_act = config.family.hidden_act
        self.act = ACTIVATIONS[self.hidden_act]
        self.gate_up_proj = Linear(
            config.hidden_size,
            (size, size),
            bias=config.mlp_bias,
            dtype=dtype,
            shard_names=("gate", "up"),
            row_starts=(rank * size, rank * size) if tp else (),
        )
        self.down_proj = Linear(
            size,
            config.hidden_size,
            bias=config.mlp_bias,
            dtype=dtype,
            col_start=rank * size if tp else None,
            reduce=tp,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(self.act(gate) * up)


def feed_forward(
    config: ModelConfig, layer_id: int, dtype: torch.dtype, tp: TensorParallel | None
) -> torch.nn.Module:
    """The MoE block on sparse layers, a gated MLP (of `intermediate_size`) on the others."""
    if config.moe is not None and config.moe.is_sparse_layer(layer_id):
        return SparseMoeBlock(config, dtype, tp)
    return GatedMLP(config, dtype, tp)
