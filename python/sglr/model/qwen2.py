"""Qwen2 decoder: the Llama block with biases on the q/k/v projections.

`ModelConfig.from_dict` sets `attention_bias` for Qwen2 checkpoints and reads its optional
sliding window (`use_sliding_window`, on the layers from `max_window_layers` on) into
`config.family`, so the shared Llama implementation computes exactly Qwen2's function; this
class exists so the architecture name maps to an explicit, documented implementation.
"""

from __future__ import annotations

import torch

from sglr.errors import ModelConfigError
from sglr.model.config import ModelConfig
from sglr.model.llama import LlamaForCausalLM
from sglr.model.parallel import TensorParallel


class Qwen2ForCausalLM(LlamaForCausalLM):
    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        if not config.attention_bias:
            raise ModelConfigError("Qwen2 checkpoints have q/k/v biases; config says attention_bias=False")
        super().__init__(config, dtype, max_positions, tp)
