"""Attention kernels: Triton (CUDA, or CPU under TRITON_INTERPRET=1), FlashInfer adapter, torch reference."""
