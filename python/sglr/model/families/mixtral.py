"""Mixtral: Llama attention (GQA, no biases) and a sparse MoE block in place of every MLP.

Checkpoint names: `block_sparse_moe.gate` (router), `block_sparse_moe.experts.N.w1/w3/w2`
(gate/up/down). The top-k weights are always renormalized. A sliding window (every layer) reaches
the attention backend as Mistral's does.

GGUF: a `llama` file with `expert_count` > 0. llama.cpp stores a layer's experts as three stacked
tensors (`ffn_gate_exps`, `ffn_up_exps`, `ffn_down_exps`, `[experts, rows, cols]`) and the router
as `ffn_gate_inp`; older files store each expert on its own (`ffn_gate.E.weight`). Both load.
"""

from __future__ import annotations

import re
from typing import Any

from sglr.errors import GGUFUnsupportedError
from sglr.model.families.llama import llama_gguf_fields
from sglr.model.family import GGUF_EXPERT, DecoderOptions, Family, GgufLayout, GgufShape
from sglr.model.family_options import RawConfig
from sglr.model.moe_config import MoEConfig

_EXPERT_NAMES = {
    "ffn_gate_inp.weight": "block_sparse_moe.gate.weight",
    "ffn_gate_exps.weight": f"block_sparse_moe.experts.{GGUF_EXPERT}.w1.weight",
    "ffn_down_exps.weight": f"block_sparse_moe.experts.{GGUF_EXPERT}.w2.weight",
    "ffn_up_exps.weight": f"block_sparse_moe.experts.{GGUF_EXPERT}.w3.weight",
}
_PER_EXPERT = re.compile(r"^ffn_(gate|down|up)\.(\d+)\.weight$")
_PER_EXPERT_PROJ = {"gate": "w1", "down": "w2", "up": "w3"}


def _experts(raw: RawConfig) -> MoEConfig:
    return MoEConfig(
        num_experts_per_tok=int(raw["num_experts_per_tok"]),
        num_experts=int(raw["num_local_experts"]),
        expert_intermediate_size=int(raw["intermediate_size"]),
        norm_topk_prob=True,
    )


def _per_expert_name(suffix: str) -> str | None:
    """An older file's expert tensor (`ffn_gate.E.weight`): its Hugging Face layer suffix."""
    match = _PER_EXPERT.match(suffix)
    if match is None:
        return None
    return f"block_sparse_moe.experts.{match.group(2)}.{_PER_EXPERT_PROJ[match.group(1)]}.weight"


def _gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    from sglr.model.gguf.moe import read_experts  # the gguf package: imported to convert a file

    num_experts, top_k, sparse = read_experts(checkpoint, shape.num_layers)
    if not all(sparse):
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: a Mixtral (llama) file with dense layers among its MoE ones"
        )
    fields = llama_gguf_fields(checkpoint, shape)
    return {**fields, "num_local_experts": num_experts, "num_experts_per_tok": top_k, "sliding_window": None}


FAMILY = Family(
    architectures={"MixtralForCausalLM": "mixtral"},
    decoder=DecoderOptions(ffn_name="block_sparse_moe", prepack_on_cpu=True),
    experts=_experts,
    gguf=GgufLayout(
        "llama",
        layer_names=_EXPERT_NAMES,
        layer_name=_per_expert_name,
        rope_rows_permuted=True,
        config_fields=_gguf_fields,
    ),
)
