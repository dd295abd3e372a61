"""Gemma 3 text decoder (`Gemma3ForCausalLM`, model_type "gemma3_text"): Gemma 2 plus RMSNorm
on each query and key head, a separate RoPE base for local layers (`rope_local_base_freq`, or
the "sliding_attention" entry of `rope_parameters`), five local layers per global one by default
(`layer_types` or `sliding_window_pattern`), and no soft-capping unless the config asks for it."""

from __future__ import annotations

from sglr.model.gemma2 import Gemma2ForCausalLM


class Gemma3ForCausalLM(Gemma2ForCausalLM):
    qk_norm = True
