"""Model definitions, checkpoint loading and the runner (torch imported by the submodules).

- `runner`: `ModelRunner(RunnerConfig(...))` — model + KV cache + request table, `forward(batch)`.
- `forward_batch`: `ExtendRequest`, `ForwardBatch.extend/decode` (built via the runner).
- `sampling` / `sampler`: `SamplingBatch.build` (from `SamplingParams`), `sample(...)`.
- `kv_cache`, `req_to_token`: the paged KV pool's memory and the per-request slot table.
- `config`, `loader`, `llama`, `qwen2`, `registry`: checkpoints and architectures.
- `decoder`, `qwen3`, `moe` (+ `moe_config`, `moe_decoder`), `mixtral`, `qwen2_moe`, `qwen3_moe`:
  the newer families and the shared mixture-of-experts block.
- `default_model`, `gguf`: the embedded default model and GGUF conversion.
"""
