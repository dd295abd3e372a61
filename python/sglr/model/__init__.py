"""Model definitions, checkpoint loading and the runner (torch imported by the submodules).

- `runner`: `ModelRunner(RunnerConfig(...))` — model + KV cache + request table, `forward(batch)`.
- `forward_batch`: `ExtendRequest`, `ForwardBatch.extend/decode` (built via the runner).
- `sampling` / `sampler`: `SamplingBatch.build` (from `SamplingParams`), `sample(...)`.
- `kv_cache`, `req_to_token`: the paged KV pool's memory and the per-request slot table.
- `config`, `loader`, `runner_config`, `weights_policy`: checkpoints, and which weights load how.
- `families` (one module per family, each declaring a `family.Family`), `registry` (finds them),
  `build`: the architectures and their models.
- `decoder` (+ `self_attention`, `feed_forward`, `layers`, `moe`): the one decoder every family
  builds on; `llava` (+ `clip_vision`): the multimodal family's tower and projector.
- `cpu_fused_decode`: a quantized model's whole CPU decode step in one Rust call.
- `default_model`, `gguf`: the embedded default model and GGUF conversion.
"""
