"""Random LoRA adapters for tiny checkpoints, written by `peft` itself (so the files are in the
exact layout PEFT saves, and `peft` can load them back as the oracle).

PEFT starts `lora_B` at zero (an adapter that changes nothing); these adapters draw both halves
from a seeded normal, large enough that greedy tokens differ from the base model's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import torch


def write_peft_adapter(
    base_path: str | Path,
    out: str | Path,
    rank: int = 8,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
    seed: int = 0,
    lora_alpha: float | None = None,
    use_rslora: bool = False,
    scale: float = 0.5,
) -> Path:
    """Saves an adapter of the model at `base_path` in `out` and returns `out`."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    config = LoraConfig(
        r=rank,
        lora_alpha=lora_alpha if lora_alpha is not None else 2 * rank,
        target_modules=list(target_modules),
        lora_dropout=0.0,
        bias="none",
        use_rslora=use_rslora,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale / param.shape[-1] ** 0.5)
    out = Path(out)
    model.save_pretrained(out)
    return out


@functools.lru_cache(maxsize=8)
def _peft_model(base_path: str, adapter_path: str) -> torch.nn.Module:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    return PeftModel.from_pretrained(base, adapter_path).eval()


def peft_greedy(
    base_path: str | Path, adapter_path: str | Path | None, prompt: list[int], max_new_tokens: int
) -> list[int]:
    """The oracle: greedy tokens of `transformers` + `peft` (fp32, eos disabled); the base model
    alone for `adapter_path` None."""
    model = _peft_model(str(base_path), str(adapter_path)) if adapter_path else _base_model(str(base_path))
    with torch.no_grad():
        out = model.generate(
            input_ids=torch.tensor([prompt]),
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


@functools.lru_cache(maxsize=4)
def _base_model(base_path: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32).eval()


def write_random_adapter(
    config,  # sglr.model.config.ModelConfig of the base
    out: str | Path,
    rank: int = 8,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
    seed: int = 0,
    scale: float = 0.5,
) -> Path:
    """An adapter in PEFT's layout written directly (no `peft`, no base weights needed): for
    benchmarks and examples on models too large to load twice."""
    import json

    from safetensors.torch import save_file

    q_size = config.num_attention_heads * config.head_dim
    kv_size = config.num_key_value_heads * config.head_dim
    hidden, inter = config.hidden_size, config.intermediate_size
    shapes = {
        "q_proj": ("self_attn", hidden, q_size),
        "k_proj": ("self_attn", hidden, kv_size),
        "v_proj": ("self_attn", hidden, kv_size),
        "o_proj": ("self_attn", q_size, hidden),
        "gate_proj": ("mlp", hidden, inter),
        "up_proj": ("mlp", hidden, inter),
        "down_proj": ("mlp", inter, hidden),
    }
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(config.num_hidden_layers):
        for module in target_modules:
            block, in_features, out_features = shapes[module]
            prefix = f"base_model.model.model.layers.{layer}.{block}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, in_features, generator=generator) * (
                scale / in_features**0.5
            )
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out_features, rank, generator=generator) * (
                scale / rank**0.5
            )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    adapter_config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": 2 * rank,
        "target_modules": list(target_modules),
        "bias": "none",
        "task_type": "CAUSAL_LM",
    }
    (out / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2))
    return out
