"""Llama 2 / Llama 3 (GQA, Llama-3 RoPE scaling, optional tied embeddings and biases): the
family every default describes.

llama.cpp's converter reorders the query and key rows of `llama` files so RoPE rotates adjacent
pairs; loading puts them back in Hugging Face's half-split order.
"""

from __future__ import annotations

from typing import Any

from sglr.errors import GGUFUnsupportedError
from sglr.model.family import Family, GgufLayout, GgufShape


def llama_attention_bias(checkpoint: Any, num_layers: int) -> bool:
    """Hugging Face Llama biases all four attention projections or none of them."""
    names = checkpoint.tensor_names()
    suffixes = ("attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias")
    present = [f"blk.{i}.{suffix}" in names for i in range(num_layers) for suffix in suffixes]
    if any(present) and not all(present):
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: a llama model with biases on some attention projections but not all"
        )
    return all(present) and bool(present)


def llama_gguf_fields(checkpoint: Any, shape: GgufShape) -> dict[str, Any]:
    return {"attention_bias": llama_attention_bias(checkpoint, shape.num_layers), "mlp_bias": False}


FAMILY = Family(
    architectures={"LlamaForCausalLM": "llama"},
    gguf=GgufLayout("llama", rope_rows_permuted=True, config_fields=llama_gguf_fields),
)
