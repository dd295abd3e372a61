"""Phi-3 decoder: the Llama block, stored with fused `qkv_proj` and `gate_up_proj` tensors.

sglr fuses the same projections itself, so loading only renames: each fused checkpoint tensor is
split (views, no copy) into the `q/k/v_proj` and `gate/up_proj` pieces a Llama checkpoint would
hold. Under tensor parallelism each piece then goes through the usual per-shard slicing, so a
rank gets its own query, key, value, gate and up rows, never a slice across the fused boundary.
LongRoPE ("longrope"/"su") scaling and partial rotary embeddings are refused by `ModelConfig`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from sglr.errors import CheckpointError
from sglr.model.llama import LlamaForCausalLM

Named = tuple[str, torch.Tensor]


class Phi3ForCausalLM(LlamaForCausalLM):
    def load_weights(self, weights: Iterable[Named]) -> None:
        super().load_weights(self._unfused(weights))

    def _unfused(self, weights: Iterable[Named]) -> Iterator[Named]:
        config = self.config
        qkv_sizes = (config.q_size, config.kv_size, config.kv_size)
        mlp_sizes = (config.intermediate_size, config.intermediate_size)
        for name, tensor in weights:
            if ".self_attn.qkv_proj." in name:
                yield from _split(name, tensor, "qkv_proj", ("q_proj", "k_proj", "v_proj"), qkv_sizes)
            elif ".mlp.gate_up_proj." in name:
                yield from _split(name, tensor, "gate_up_proj", ("gate_proj", "up_proj"), mlp_sizes)
            else:
                yield name, tensor


def _split(
    name: str, tensor: torch.Tensor, fused: str, parts: tuple[str, ...], sizes: tuple[int, ...]
) -> Iterator[Named]:
    if tensor.shape[0] != sum(sizes):
        raise CheckpointError(f"{name}: {tensor.shape[0]} rows, the config implies {sum(sizes)}")
    for part, piece in zip(parts, tensor.split(sizes, dim=0), strict=True):
        yield name.replace(f".{fused}.", f".{part}."), piece
