"""The Mistral family's declaration: found by the registry under its own module, a window on every
layer read from its config (none when `sliding_window` is null), Llama's layers otherwise, and a
decoder LLaVA accepts. (Greedy tokens and logits against `transformers`: test_families_dense.py.)"""

from __future__ import annotations

import torch
from dense_families import family_config

from sglr.model.build import build_model
from sglr.model.config import ModelConfig
from sglr.model.families import mistral
from sglr.model.family import DecoderOptions
from sglr.model.registry import architecture_of_model_type, family_of


def test_mistral_is_its_own_family() -> None:
    assert family_of("MistralForCausalLM") is mistral.FAMILY
    assert architecture_of_model_type("mistral") == "MistralForCausalLM"
    assert mistral.FAMILY.decoder == DecoderOptions() and mistral.FAMILY.gguf is None
    assert "MistralForCausalLM" in family_of("LlavaForConditionalGeneration").vision.text_architectures


def test_its_window_covers_every_layer() -> None:
    raw = family_config("mistral", num_hidden_layers=3).to_dict()
    config = ModelConfig.from_dict(raw)
    assert config.family.layer_windows == (8, 8, 8)
    assert ModelConfig.from_dict({**raw, "sliding_window": None}).family.layer_windows == ()
    model = build_model(config, torch.float32, torch.device("cpu"), 64)
    assert type(model).__name__ == "MistralForCausalLM"
    assert [variant.sliding_window for variant in model.attention_variants()] == [8, 8, 8]
