"""Dequantizing GGUF tensors to float32 with the `gguf` package's block decoders."""

from __future__ import annotations

import numpy as np

from sglr.errors import GGUFUnsupportedError
from sglr.model.gguf.reader import GGUFTensor

# Plain floats, the legacy block formats and the K-quants; the i-quants and ternary formats are
# left out on purpose until a checkpoint needs them and a test covers them.
SUPPORTED_TYPE_NAMES = (
    "F32",
    "F16",
    "BF16",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
)


def check_supported(tensor: GGUFTensor) -> None:
    """Raises `GGUFUnsupportedError` naming the tensor and its type when sglr cannot decode it."""
    if tensor.type_name not in SUPPORTED_TYPE_NAMES:
        raise GGUFUnsupportedError(
            f"tensor {tensor.name!r} has GGUF type {tensor.type_name}, which sglr cannot dequantize "
            f"(supported: {', '.join(SUPPORTED_TYPE_NAMES)})"
        )


def dequantize(tensor: GGUFTensor) -> np.ndarray:
    """The tensor's values as a float32 array of shape `tensor.shape` (a new array, not a view
    into the file)."""
    check_supported(tensor)
    from gguf import quants

    if tensor.type_name == "F32":
        values = np.array(tensor.data, dtype=np.float32)
    else:
        values = quants.dequantize(tensor.data, tensor.ggml_type)
    return values.reshape(tensor.shape)
