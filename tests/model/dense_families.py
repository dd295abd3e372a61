"""Tiny random-weight checkpoints of the dense families, written with `transformers` itself.

Every weight is redrawn from a seeded generator (norm weights too, around their neutral value:
1 for Llama-style norms, 0 for Gemma's `1 + w` norms), so a wrong convention shows up in the
logits. Windows are short (8) so that test prompts and generations run past them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from sglr.testing.tiny_tokenizer import trained_tokenizer_json

WINDOW = 8
VOCAB_SIZE = 512  # the smallest vocabulary sglr's tiny tokenizer trains
_SHAPE = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def family_config(family: str, **overrides: Any) -> Any:
    """A `transformers` config for `family` ("mistral", "gemma2", "gemma3", "phi3", or "qwen2" with
    its optional sliding window on)."""
    import transformers as tf

    if family == "mistral":
        kwargs = dict(num_hidden_layers=2, sliding_window=WINDOW, tie_word_embeddings=False)
        return tf.MistralConfig(**{**_SHAPE, **kwargs, **overrides})
    if family == "gemma2":
        kwargs = dict(
            num_hidden_layers=3,
            sliding_window=WINDOW,
            query_pre_attn_scalar=24,
            attn_logit_softcapping=1.5,  # small, so that capping changes the scores
            final_logit_softcapping=4.0,
        )
        return tf.Gemma2Config(**{**_SHAPE, **kwargs, **overrides})
    if family == "gemma3":
        kwargs = dict(
            num_hidden_layers=3,
            sliding_window=WINDOW,
            query_pre_attn_scalar=24,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            },
        )
        return tf.Gemma3TextConfig(**{**_SHAPE, **kwargs, **overrides})
    if family == "qwen2":  # the window on the layers from max_window_layers on
        kwargs = dict(
            num_hidden_layers=2, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1
        )
        return tf.Qwen2Config(**{**_SHAPE, **kwargs, **overrides})
    if family == "phi3":
        kwargs = dict(num_hidden_layers=2, sliding_window=None, tie_word_embeddings=False)
        return tf.Phi3Config(**{**_SHAPE, **kwargs, **overrides})
    raise ValueError(family)


def write_family_checkpoint(path: Path, family: str, seed: int = 0, **overrides: Any) -> Path:
    """Writes `family`'s tiny checkpoint at `path` (same seed, same weights whatever the overrides
    that do not change shapes) and returns `path`."""
    from transformers import AutoModelForCausalLM

    config = family_config(family, **overrides)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    gemma = family.startswith("gemma")
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            noise = torch.empty(param.shape).uniform_(-0.3, 0.3, generator=generator)
            if "norm" in name:
                param.copy_(noise if gemma else 1.0 + noise)
            else:
                param.copy_(torch.empty(param.shape).normal_(0.0, 0.15, generator=generator))
    model.save_pretrained(path)
    # The engine needs a tokenizer even when it is given token ids.
    (path / "tokenizer.json").write_text(trained_tokenizer_json(VOCAB_SIZE))
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>"}
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return path
