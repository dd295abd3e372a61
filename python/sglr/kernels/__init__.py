"""Attention kernels: Triton (CUDA, or CPU under TRITON_INTERPRET=1), FlashInfer adapter, torch reference.
Mixture-of-experts expert MLPs: `moe_grouped` (grouped by expert; prepacked CPU weights from
`cpu_linear`; for decode-sized CPU batches the rust kernel of `moe_panels`) and the fused Triton
kernels of `triton_moe`.

The bottom layer: nothing here imports `sglr.model`. What attention needs from a model step is
`attention_metadata.AttentionMetadata` and `kv_pool.PagedKVPool`, both owned here; the model's
`ForwardBatch` and `KVCache` provide them.
"""
