"""`MoEConfig`: the mixture-of-experts facts of a `config.json` (Mixtral, Qwen2-MoE, Qwen3-MoE).

Each family names the same facts differently and reads them itself (its declaration's `experts`,
in `sglr.model.families`): Mixtral calls its experts `num_local_experts` and sizes them with
`intermediate_size`, and always renormalizes the top-k routing weights; the Qwen families use
`num_experts` and `moe_intermediate_size` (keeping `intermediate_size` for their dense layers),
renormalize only when `norm_topk_prob` says so, and may interleave dense layers
(`decoder_sparse_step`, `mlp_only_layers`). Qwen2-MoE adds a shared expert behind a sigmoid gate.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglr.errors import ModelConfigError


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
