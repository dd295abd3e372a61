"""`MoEConfig`: the mixture-of-experts facts of a `config.json` (Mixtral, Qwen2-MoE, Qwen3-MoE).

Each family names the same facts differently: Mixtral calls its experts `num_local_experts` and
sizes them with `intermediate_size`, and always renormalizes the top-k routing weights; the Qwen
families use `num_experts` and `moe_intermediate_size` (keeping `intermediate_size` for their
dense layers), renormalize only when `norm_topk_prob` says so, and may interleave dense layers
(`decoder_sparse_step`, `mlp_only_layers`). Qwen2-MoE adds a shared expert behind a sigmoid gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import ModelConfigError

MOE_ARCHITECTURES = ("MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")


@dataclass(frozen=True)
class MoEConfig:
    num_experts: int
    num_experts_per_tok: int  # top-k
    expert_intermediate_size: int  # of each routed expert
    norm_topk_prob: bool  # renormalize the top-k weights to sum to 1
    shared_expert_intermediate_size: int = 0  # 0: no shared expert
    decoder_sparse_step: int = 1  # every this many layers is sparse ...
    mlp_only_layers: tuple[int, ...] = ()  # ... except these, which keep a dense MLP

    def __post_init__(self) -> None:
        if self.num_experts < 1 or self.expert_intermediate_size < 1 or self.decoder_sparse_step < 1:
            raise ModelConfigError(
                "num_experts, the expert intermediate size and decoder_sparse_step must be >= 1"
            )
        if not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise ModelConfigError(
                f"num_experts_per_tok must be in [1, num_experts={self.num_experts}], "
                f"got {self.num_experts_per_tok}"
            )
        if self.shared_expert_intermediate_size < 0:
            raise ModelConfigError("shared_expert_intermediate_size must be >= 0")

    def is_sparse_layer(self, layer_id: int) -> bool:
        """Whether decoder layer `layer_id` routes to experts (else it has a dense MLP)."""
        return layer_id not in self.mlp_only_layers and (layer_id + 1) % self.decoder_sparse_step == 0

    def intermediate_sizes(self) -> tuple[int, ...]:
        """Every intermediate size that tensor parallelism splits."""
        sizes = (self.expert_intermediate_size,)
        return sizes + (
            (self.shared_expert_intermediate_size,) if self.shared_expert_intermediate_size else ()
        )


def read_moe_config(raw: dict[str, Any], architecture: str) -> MoEConfig | None:
    """The MoE part of a `config.json` dict; None for a dense architecture."""
    if architecture not in MOE_ARCHITECTURES:
        return None
    try:
        num_experts_per_tok = int(raw["num_experts_per_tok"])
        if architecture == "MixtralForCausalLM":
            return MoEConfig(
                num_experts=int(raw["num_local_experts"]),
                num_experts_per_tok=num_experts_per_tok,
                expert_intermediate_size=int(raw["intermediate_size"]),
                norm_topk_prob=True,
            )
        # transformers writes `num_experts` for Qwen2-MoE and `num_local_experts` for Qwen3-MoE.
        num_experts = raw.get("num_experts", raw.get("num_local_experts"))
        if num_experts is None:
            raise KeyError("num_experts")
        shared = 0
        if architecture == "Qwen2MoeForCausalLM":
            shared = int(raw["shared_expert_intermediate_size"])
        return MoEConfig(
            num_experts=int(num_experts),
            num_experts_per_tok=num_experts_per_tok,
            expert_intermediate_size=int(raw["moe_intermediate_size"]),
            norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
            shared_expert_intermediate_size=shared,
            decoder_sparse_step=int(raw.get("decoder_sparse_step", 1)),
            mlp_only_layers=tuple(int(i) for i in raw.get("mlp_only_layers") or ()),
        )
    except KeyError as exc:
        raise ModelConfigError(f"{architecture} config.json lacks required field {exc.args[0]!r}") from None
