"""Fixtures for tests and benchmarks (never imported by the package itself).

- `tiny`: seeded tiny random-weight Llama / Qwen2 checkpoints, built in about a second and cached.
- `tiny_families`: tiny Qwen3 and mixture-of-experts checkpoints written by `transformers`.
- `tiny_llava`: tiny LLaVA checkpoints written by `transformers`.
- `tiny_tokenizer`: the byte-level BPE tokenizer they share, trained on the standard library.
"""
