"""CPU tensors handed to the Rust kernels as numpy arrays sharing their memory. numpy has no
bf16, so a bf16 tensor travels as its int16 bit pattern (the kernels read it as bf16)."""

from __future__ import annotations

import numpy as np
import torch

# The dtypes the kernels take, and the integer view that carries each (None: as is).
BIT_VIEWS = {torch.float32: None, torch.bfloat16: torch.int16}


def numpy_view(t: torch.Tensor) -> np.ndarray:
    """`t` (float32 or bfloat16, CPU) as a numpy array over the same memory."""
    bits = BIT_VIEWS[t.dtype]
    return (t if bits is None else t.view(bits)).numpy()
