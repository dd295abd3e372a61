"""Mistral: the Llama model with sliding-window attention on every layer (`sliding_window`;
`"sliding_window": null` is plain Llama). Everything else is Llama's default, and its GGUF files
are `llama` ones (without a window, as llama.cpp runs them), so it declares no GGUF layout."""

from __future__ import annotations

from sglr.model.family import Family

FAMILY = Family(architectures={"MistralForCausalLM": "mistral"})
