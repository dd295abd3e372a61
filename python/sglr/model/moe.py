"""The sparse mixture-of-experts block shared by Mixtral, Qwen2-MoE and Qwen3-MoE.

router linear -> softmax -> top-k experts per token (weights renormalized when the family says
so) -> each expert's gated MLP on its own tokens only (`sglr.kernels.moe_grouped`) -> the
weighted sum, plus Qwen2-MoE's shared expert scaled by a sigmoid gate.

Expert weights are stacked per layer (`w13 [E, 2*I, H]`, `w2 [E, H, I]`) and loaded from the
per-expert checkpoint tensors (`experts.N.w1/w2/w3` for Mixtral, `experts.N.gate_proj/...` for
Qwen) or from the stacked ones newer exports write (`experts.gate_up_proj`, `experts.down_proj`).

Tensor parallelism splits the intermediate dimension of every expert (and of the shared expert):
each rank holds a slice of all experts, computes partial outputs for every token it routes (the
router is replicated, so every rank picks the same experts) and the block all-reduces once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import torch

from sglr.envs import cpu_moe_kernel
from sglr.errors import CheckpointError, ModelConfigError
from sglr.kernels.cpu_linear import pack_weight
from sglr.kernels.moe_grouped import CpuExperts, expert_mlp
from sglr.kernels.moe_panels import pack_expert_panels
from sglr.model.config import ModelConfig
from sglr.model.layers import Linear, load_named_weights
from sglr.model.parallel import TensorParallel, rank_and_size

# One expert's projection: `<block>.experts.<N>.<proj>.weight`.
_PER_EXPERT = re.compile(
    r"^(?P<module>.+\.experts)\.(?P<expert>\d+)\.(?P<proj>w1|w2|w3|gate_proj|up_proj|down_proj)\.weight$"
)
# All experts of a block in one tensor: `<block>.experts.gate_up_proj` [E, 2I, H] or `.down_proj` [E, H, I].
_STACKED = re.compile(r"^(?P<module>.+\.experts)\.(?P<proj>gate_up_proj|down_proj)$")
_KIND_OF_PROJ = {
    "w1": "gate",
    "gate_proj": "gate",
    "w3": "up",
    "up_proj": "up",
    "w2": "down",
    "down_proj": "down",
}
_KINDS = ("gate", "up", "down")


def route_tokens(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """router logits `[T, E]` -> (fp32 weights `[T, K]`, expert ids `[T, K]`), best first.

    The softmax runs over all experts in fp32 (as the reference models do); `renormalize` rescales
    the chosen K probabilities to sum to 1."""
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)
    weights, expert_ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, expert_ids


class FusedExperts(torch.nn.Module):
    """The routed experts of one block, stacked; this rank's slice of each one's intermediate dim."""

    def __init__(
        self,
        num_experts: int,
        hidden_size: int,
        intermediate_size: int,
        dtype: torch.dtype,
        tp: TensorParallel | None,
    ) -> None:
        super().__init__()
        rank, num_ranks = rank_and_size(tp)
        if intermediate_size % num_ranks:
            raise ModelConfigError(
                f"expert intermediate size {intermediate_size} does not split over tp_size={num_ranks}"
            )
        self.num_experts = num_experts
        self.local_size = intermediate_size // num_ranks
        self.first_unit = rank * self.local_size  # first checkpoint intermediate row this rank holds
        self.w13 = torch.nn.Parameter(
            torch.empty(num_experts, 2 * self.local_size, hidden_size, dtype=dtype), requires_grad=False
        )
        self.w2 = torch.nn.Parameter(
            torch.empty(num_experts, hidden_size, self.local_size, dtype=dtype), requires_grad=False
        )
        # Packed CPU copies of the weights, made at the first CPU forward (weights are final by
        # then); `load_expert` drops them. oneDNN's packs double the experts' host memory, the
        # rust kernel's panels (float32) triple it.
        self._cpu_packs: CpuExperts | None = None

    def forward(
        self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor
    ) -> torch.Tensor:
        cpu_packs = None
        if hidden.device.type == "cpu":
            if self._cpu_packs is None:
                self._cpu_packs = CpuExperts(
                    [(pack_weight(w13), pack_weight(w2)) for w13, w2 in zip(self.w13, self.w2, strict=True)],
                    pack_expert_panels(self.w13, self.w2) if cpu_moe_kernel() else None,
                )
            cpu_packs = self._cpu_packs
        return expert_mlp(hidden, self.w13, self.w2, topk_weights, topk_ids, cpu_packs)

    def load_expert(self, expert: int, kind: str, tensor: torch.Tensor, name: str) -> None:
        """Copies one expert's checkpoint projection (`gate`/`up` `[I, H]`, `down` `[H, I]`)."""
        if not 0 <= expert < self.num_experts:
            raise CheckpointError(f"{name}: expert {expert} out of range (the model has {self.num_experts})")
        unit_dim = 1 if kind == "down" else 0  # the dimension of the intermediate units
        local = self.local_size
        if tensor.dim() != 2 or tensor.shape[unit_dim] < self.first_unit + local:
            raise CheckpointError(f"{name}: checkpoint shape {tuple(tensor.shape)} does not fit the experts")
        part = tensor.narrow(unit_dim, self.first_unit, local)
        if kind == "down":
            dest = self.w2.data[expert]
        else:
            dest = self.w13.data[expert].narrow(0, 0 if kind == "gate" else local, local)
        if tuple(part.shape) != tuple(dest.shape):
            raise CheckpointError(
                f"{name}: checkpoint slice {tuple(part.shape)} != model {tuple(dest.shape)}"
            )
        with torch.no_grad():
            dest.copy_(part)
        self._cpu_packs = None


class SharedExpert(torch.nn.Module):
    """Qwen2-MoE's always-on expert: a gated MLP. Under tensor parallelism its down projection
    leaves partial sums: the MoE block reduces them together with the routed experts'."""

    def __init__(
        self, hidden_size: int, intermediate_size: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> None:
        super().__init__()
        rank, num_ranks = rank_and_size(tp)
        if intermediate_size % num_ranks:
            raise ModelConfigError(
                f"shared expert intermediate size {intermediate_size} does not split over tp_size={num_ranks}"
            )
        size = intermediate_size // num_ranks
        self.gate_up_proj = Linear(
            hidden_size,
            (size, size),
            bias=False,
            dtype=dtype,
            shard_names=("gate", "up"),
            row_starts=(rank * size, rank * size) if tp else (),
        )
        self.down_proj = Linear(
            size, hidden_size, bias=False, dtype=dtype, col_start=rank * size if tp else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(torch.nn.functional.silu(gate) * up)


class SparseMoeBlock(torch.nn.Module):
    """`[T, H]` -> `[T, H]`: routed experts (+ gated shared expert), one all-reduce under tp.

    Checkpoint names under the block: `gate` (the router), `experts.*`, and for Qwen2-MoE
    `shared_expert.*` and `shared_expert_gate`."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype, tp: TensorParallel | None) -> None:
        super().__init__()
        moe = config.moe
        if moe is None:
            raise ModelConfigError(f"{config.architecture} has no experts to build a MoE block from")
        self.top_k = moe.num_experts_per_tok
        self.renormalize = moe.norm_topk_prob
        self.tp = tp
        self.gate = Linear(config.hidden_size, moe.num_experts, bias=False, dtype=dtype)
        self.experts = FusedExperts(
            moe.num_experts, config.hidden_size, moe.expert_intermediate_size, dtype, tp
        )
        self.shared_expert: SharedExpert | None = None
        self.shared_expert_gate: Linear | None = None
        if moe.shared_expert_intermediate_size:
            self.shared_expert = SharedExpert(
                config.hidden_size, moe.shared_expert_intermediate_size, dtype, tp
            )
            self.shared_expert_gate = Linear(config.hidden_size, 1, bias=False, dtype=dtype)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        topk_weights, topk_ids = route_tokens(self.gate(hidden), self.top_k, self.renormalize)
        out = self.experts(hidden, topk_weights, topk_ids)
        if self.shared_expert is not None and self.shared_expert_gate is not None:
            out = out + torch.sigmoid(self.shared_expert_gate(hidden)) * self.shared_expert(hidden)
        return out if self.tp is None else self.tp.all_reduce(out)


def load_moe_weights(
    model: torch.nn.Module, weights: Iterable[tuple[str, torch.Tensor]], ignored_names: Sequence[str] = ()
) -> None:
    """`load_named_weights` for a model with `FusedExperts`: expert tensors go to their stacked
    parameters, everything else the usual way. Raises `CheckpointError` for a missing expert."""
    experts = {name: m for name, m in model.named_modules() if isinstance(m, FusedExperts)}
    loaded: set[tuple[str, int, str]] = set()

    def other_weights() -> Iterator[tuple[str, torch.Tensor]]:
        for name, tensor in weights:
            pieces = list(_expert_pieces(name, tensor))
            if not pieces or pieces[0][0] not in experts:
                yield name, tensor
                continue
            for module, expert, kind, part in pieces:
                experts[module].load_expert(expert, kind, part, name)
                loaded.add((module, expert, kind))

    stacked = {f"{module}.{p}" for module in experts for p in ("w13", "w2")}
    load_named_weights(model, other_weights(), ignored_names, loaded_elsewhere=stacked)
    missing = [
        f"{module}.{expert}.{kind}"
        for module, m in experts.items()
        for expert in range(m.num_experts)
        for kind in _KINDS
        if (module, expert, kind) not in loaded
    ]
    if missing:
        shown = ", ".join(missing[:5])
        raise CheckpointError(
            f"checkpoint lacks {len(missing)} expert weights: {shown}{' ...' if len(missing) > 5 else ''}"
        )


def _expert_pieces(name: str, tensor: torch.Tensor) -> Iterator[tuple[str, int, str, torch.Tensor]]:
    """(experts module, expert, kind, `[rows, cols]` tensor) for each expert projection `name` holds."""
    match = _PER_EXPERT.match(name)
    if match:
        yield match["module"], int(match["expert"]), _KIND_OF_PROJ[match["proj"]], tensor
        return
    match = _STACKED.match(name)
    if not match:
        return
    if tensor.dim() != 3:
        raise CheckpointError(f"{name}: stacked experts need 3 dims, got shape {tuple(tensor.shape)}")
    for expert in range(tensor.shape[0]):
        if match["proj"] == "down_proj":
            yield match["module"], expert, "down", tensor[expert]
        else:
            gate, up = tensor[expert].chunk(2, dim=0)
            yield match["module"], expert, "gate", gate
            yield match["module"], expert, "up", up
