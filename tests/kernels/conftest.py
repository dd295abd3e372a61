"""Triton kernels run in the CPU interpreter when there is no CUDA device.

Triton reads TRITON_INTERPRET when a kernel module is imported, so it is set here, before any
test module imports sglr.kernels.triton_*.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
