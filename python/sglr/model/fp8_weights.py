"""Which linears run in fp8, and online quantization (`RunnerConfig.quantization="fp8"` on a
float checkpoint): after loading, each dense projection of the decoder layers (attention
qkv / o, the MLP's and shared experts' gate_up / down) becomes e4m3 values with one fp32 scale
per output channel (`sglr.kernels.fp8_linear`). Embeddings, the head, norms, MoE routers and
routed experts stay in the run dtype. Under tensor parallelism each rank quantizes the slice it
loaded, so its scales are its rows'.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from sglr.kernels.fp8_linear import quantize_per_channel
from sglr.model.layers import FUSED_PROJECTIONS, Linear

FP8_PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def fp8_linears(model: torch.nn.Module) -> Iterator[tuple[str, Linear]]:
    """(name, module) of each linear that runs in fp8: the decoder layers' projections."""
    for name, module in model.named_modules():
        in_layers = name.startswith("model.layers.") and name.rsplit(".", 1)[-1] in FP8_PROJECTIONS
        if in_layers and isinstance(module, Linear) and module.quantized is None:
            yield name, module


def quantize_linears(model: torch.nn.Module) -> int:
    """Replaces each `fp8_linears` weight (already loaded) by its per-channel fp8 form; returns
    how many linears were quantized."""
    count = 0
    with torch.no_grad():
        for _, module in list(fp8_linears(model)):
            if module.fp8 is None:
                module.use_fp8(quantize_per_channel(module.weight))
                count += 1
    return count


def linear_checkpoint_names(module_name: str, module: Linear) -> list[str]:
    """The checkpoint weights a linear is loaded from, in its row order (a fused one's parts)."""
    if not module.shard_offsets:
        return [f"{module_name}.weight"]
    prefix = module_name.rsplit(".", 1)[0]
    fused = module_name.rsplit(".", 1)[1]
    by_shard = {shard: part for part, name, shard in FUSED_PROJECTIONS if name == fused}
    return [f"{prefix}.{by_shard[shard]}.weight" for shard in module.shard_offsets]
