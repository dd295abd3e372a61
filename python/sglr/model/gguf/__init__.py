"""GGUF checkpoints (llama.cpp's format) as Hugging Face-format directories.

`resolve_gguf(path)` converts a `.gguf` file once (dequantizing its weights to the run dtype,
restoring Hugging Face tensor names and layouts, rebuilding config, tokenizer and chat template
from its metadata) and returns the cached directory; `convert_gguf(path, out_dir)` does one
conversion without the cache. Supported: the architectures the model families declare
(`sglr.model.families`, each family's `GgufLayout`: its tensor names and metadata) with
byte-level BPE tokenizers; tensors F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K..Q6_K.
"""

from sglr.model.gguf.cache import cache_root, converted_dir, resolve_gguf
from sglr.model.gguf.convert import RUN_DTYPES, convert_gguf

__all__ = ["RUN_DTYPES", "cache_root", "convert_gguf", "converted_dir", "resolve_gguf"]
