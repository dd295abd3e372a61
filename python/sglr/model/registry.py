"""Architecture name (`config.json` "architectures") -> model class."""

from __future__ import annotations

import torch

from sglr.errors import ModelConfigError
from sglr.model.config import ModelConfig
from sglr.model.parallel import TensorParallel


def model_class(architecture: str) -> type[torch.nn.Module]:
    if architecture == "LlamaForCausalLM":
        from sglr.model.llama import LlamaForCausalLM

        return LlamaForCausalLM
    if architecture == "Qwen2ForCausalLM":
        from sglr.model.qwen2 import Qwen2ForCausalLM

        return Qwen2ForCausalLM
    if architecture == "MistralForCausalLM":
        from sglr.model.mistral import MistralForCausalLM

        return MistralForCausalLM
    if architecture == "Gemma2ForCausalLM":
        from sglr.model.gemma2 import Gemma2ForCausalLM

        return Gemma2ForCausalLM
    if architecture == "Gemma3ForCausalLM":
        from sglr.model.gemma3 import Gemma3ForCausalLM

        return Gemma3ForCausalLM
    if architecture == "Phi3ForCausalLM":
        from sglr.model.phi3 import Phi3ForCausalLM

        return Phi3ForCausalLM
    if architecture == "Qwen3ForCausalLM":
        from sglr.model.qwen3 import Qwen3ForCausalLM

        return Qwen3ForCausalLM
    if architecture == "MixtralForCausalLM":
        from sglr.model.mixtral import MixtralForCausalLM

        return MixtralForCausalLM
    if architecture == "Qwen2MoeForCausalLM":
        from sglr.model.qwen2_moe import Qwen2MoeForCausalLM

        return Qwen2MoeForCausalLM
    if architecture == "Qwen3MoeForCausalLM":
        from sglr.model.qwen3_moe import Qwen3MoeForCausalLM

        return Qwen3MoeForCausalLM
    if architecture == "LlavaForConditionalGeneration":
        from sglr.model.llava import LlavaForConditionalGeneration

        return LlavaForConditionalGeneration
    if architecture == "LlavaNextForConditionalGeneration":
        from sglr.model.llava import LlavaNextForConditionalGeneration

        return LlavaNextForConditionalGeneration
    if architecture == "LlavaNextVideoForConditionalGeneration":
        from sglr.model.llava import LlavaNextVideoForConditionalGeneration

        return LlavaNextVideoForConditionalGeneration
    raise ModelConfigError(f"no sglr implementation for architecture {architecture!r}")


def build_model(
    config: ModelConfig,
    dtype: torch.dtype,
    device: torch.device,
    max_positions: int,
    tp: TensorParallel | None = None,
) -> torch.nn.Module:
    """An uninitialized model (parameters hold garbage until weights are loaded) on `device`,
    holding this rank's shard under tensor parallelism."""
    with torch.device(device):
        return model_class(config.architecture)(config, dtype, max_positions, tp).eval()
