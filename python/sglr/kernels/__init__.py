"""Attention kernels: Triton (CUDA, or CPU under TRITON_INTERPRET=1), FlashInfer adapter, torch reference.

The bottom layer: nothing here imports `sglr.model`. What attention needs from a model step is
`attention_metadata.AttentionMetadata` and `kv_pool.PagedKVPool`, both owned here; the model's
`ForwardBatch` and `KVCache` provide them.
"""
