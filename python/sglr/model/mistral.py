"""Mistral decoder: the Llama block with sliding-window attention on every layer.

`ModelConfig.from_dict` turns `sliding_window` into per-layer windows (`config.family`), and the
Llama attention hands each layer's window to the backend, so the Llama implementation computes
Mistral's function; a config with `"sliding_window": null` is plain Llama.
"""

from __future__ import annotations

from sglr.model.llama import LlamaForCausalLM


class MistralForCausalLM(LlamaForCausalLM):
    pass
