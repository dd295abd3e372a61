"""What mixture-of-experts GGUF files add to the conversion (the tensor names are each family's:
`sglr.model.families.mixtral`, `qwen2_moe`, `qwen3_moe`).

llama.cpp stores a layer's routed experts as three stacked tensors (`[experts, rows, cols]` in
row-major order), which become one Hugging Face tensor per expert (their names carry the
`GGUF_EXPERT` placeholder until split), and a router per sparse layer (`ffn_gate_inp`).
"""

from __future__ import annotations

from typing import Any

from sglr.errors import GGUFFormatError
from sglr.model.family import GGUF_EXPERT


def is_sparse_layer(tensor_names: frozenset[str], layer: int) -> bool:
    """Whether the layer has a router or experts (then it must have both)."""
    return any(
        f"blk.{layer}.{suffix}" in tensor_names
        for suffix in ("ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_gate.0.weight")
    )


def read_experts(checkpoint: Any, num_layers: int) -> tuple[int, int, list[bool]]:
    """(experts, experts per token, per layer whether it routes) of a mixture-of-experts file;
    `GGUFFormatError` for one without experts."""
    num_experts = int(checkpoint.arch_get("expert_count", 0) or 0)
    if num_experts == 0:
        raise GGUFFormatError(f"{checkpoint.path}: {checkpoint.architecture} file without expert_count")
    names = checkpoint.tensor_names()
    sparse = [is_sparse_layer(names, i) for i in range(num_layers)]
    if not any(sparse):
        raise GGUFFormatError(
            f"{checkpoint.path}: expert_count is {num_experts} but no layer has expert tensors"
        )
    return num_experts, int(checkpoint.arch_require("expert_used_count")), sparse


def stored_moe_shape(hf_name: str, config: dict[str, Any]) -> tuple[int, ...] | None:
    """The shape a MoE tensor has in the file (stacked experts: `[experts, rows, cols]`; the
    shared expert's gate: `[hidden]`), or None for any other tensor."""
    hidden = config["hidden_size"]
    num_experts = config.get("num_local_experts", config.get("num_experts"))
    if num_experts is None:
        return None
    expert_size = config.get("moe_intermediate_size", config["intermediate_size"])
    shared_size = config.get("shared_expert_intermediate_size", 0)
    if hf_name.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight")):
        return (num_experts, hidden)
    if hf_name.endswith("shared_expert_gate.weight"):
        return (hidden,)
    if ".shared_expert." in hf_name:
        return (hidden, shared_size) if hf_name.endswith("down_proj.weight") else (shared_size, hidden)
    if ".experts." not in hf_name:
        return None
    shape = (
        (hidden, expert_size)
        if hf_name.endswith(("w2.weight", "down_proj.weight"))
        else (expert_size, hidden)
    )
    return (num_experts, *shape) if GGUF_EXPERT in hf_name else shape
