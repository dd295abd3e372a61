"""Tiny random-weight checkpoints of the Qwen3 and mixture-of-experts families, written by
`transformers` itself (`save_pretrained`, so it must be installed), so the tensor names and
config fields are exactly the ones it writes. The tokenizer is the seeded tiny model's
(`sglr.testing.tiny`, vocabulary 4096), so engines load them. For tests and benchmarks:

    path = write_family_checkpoint(tmp_path, "mixtral", seed=1, hidden_size=512)

Weights are redrawn at unit activation scale (as `sglr.testing.tiny` does): `transformers`'
initializer (std 0.02) gives near-uniform logits, whose greedy ties would make comparisons flaky.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from sglr.testing.tiny import tiny_model_path

# The text shape every tiny family checkpoint shares (tiny_llava starts its text model from it).
TEXT_CONFIG: dict[str, Any] = {
    "vocab_size": 4096,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}
# family -> (config class, model class, its own fields)
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"intermediate_size": 96, "head_dim": 24}),
    "mixtral": (
        "MixtralConfig",
        "MixtralForCausalLM",
        {"intermediate_size": 48, "num_local_experts": 6, "num_experts_per_tok": 2, "sliding_window": None},
    ),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        {
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 80,
            "num_experts": 8,
            "num_experts_per_tok": 3,
            "norm_topk_prob": False,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [1],
            "num_hidden_layers": 3,
        },
    ),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        {
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "norm_topk_prob": True,
            "head_dim": 24,
        },
    ),
}


def write_family_checkpoint(
    path: Path, family: str, seed: int = 0, max_shard_size: str | None = None, **overrides: Any
) -> Path:
    """Writes the checkpoint of `family` (a key of `FAMILIES`) at `path`; `overrides` are config
    fields, `max_shard_size` (e.g. "200KB") splits the weights over several safetensors files."""
    import transformers

    config_name, model_name, fields = FAMILIES[family]
    config = getattr(transformers, config_name)(**{**TEXT_CONFIG, **fields, **overrides})
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                value = 1.0 + 0.1 * torch.randn(param.shape, generator=generator)
            elif name.endswith(".bias"):
                value = 0.1 * torch.randn(param.shape, generator=generator)
            elif name == "model.embed_tokens.weight":
                value = torch.randn(param.shape, generator=generator)
            else:  # unit-variance outputs: the fan-in is the last dimension (also of stacked experts)
                value = torch.randn(param.shape, generator=generator) / param.shape[-1] ** 0.5
            param.copy_(value)
    model.save_pretrained(path, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    tokenizer_dir = tiny_model_path("llama")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, path / name)
    return path
