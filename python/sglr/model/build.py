"""`build_model`: a config's model, as its family declares it (`sglr.model.registry`)."""

from __future__ import annotations

import functools

import torch

from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderForCausalLM
from sglr.model.parallel import TensorParallel
from sglr.model.registry import family_of


def build_model(
    config: ModelConfig,
    dtype: torch.dtype,
    device: torch.device,
    max_positions: int,
    tp: TensorParallel | None = None,
) -> torch.nn.Module:
    """An uninitialized model (parameters hold garbage until weights are loaded) on `device`,
    holding this rank's shard under tensor parallelism: the family's own class for a multimodal
    family, else the decoder built with the family's options."""
    family = family_of(config.architecture)
    with torch.device(device):
        if family.vision is not None:
            model = family.vision.model_class(config.architecture)(config, dtype, max_positions, tp)
        else:
            model = decoder_class(config.architecture)(config, dtype, max_positions, tp, family.decoder)
        return model.eval()


@functools.cache
def decoder_class(architecture: str) -> type[DecoderForCausalLM]:
    """`DecoderForCausalLM` under the architecture's name, so a model says what it is (reprs,
    logs): the families differ in their options, not in code."""
    return type(architecture, (DecoderForCausalLM,), {"__module__": __name__, "__qualname__": architecture})
