"""Output constraints for decoding: regexes and JSON schemas compiled to token-level FSMs.

The engine uses them through one interface, `Constraints` (`runtime.py`): compile off the loop,
batched masks, accepting sampled tokens with jump-forward. Underneath, the only place (with
`sglr.errors`) that talks to `sglr._core` about constraints:

- `vocabulary_from_hf` / `vocabulary_from_tiktoken`: a tokenizer's token bytes as a
  `Vocabulary` (byte-level BPE, sentencepiece with byte fallback, tiktoken raw bytes).
- `ConstraintCache`: compiles `(pattern or schema, options, vocabulary)` once and shares the
  immutable `TokenFsm` between requests and threads.
- `allocate_token_bitmask` / `fill_token_bitmasks`: the once-per-decode-step batched mask fill
  into one int32 `[batch, ceil(V / 32)]` array, GIL released.
"""

from sglr.engine.constraints.cache import ConstraintCache, JsonSchemaConfig
from sglr.engine.constraints.masks import (
    allocate_token_bitmask,
    allowed_token_ids_from_bitmask,
    fill_token_bitmasks,
)
from sglr.engine.constraints.vocab import vocabulary_from_hf, vocabulary_from_tiktoken

__all__ = [
    "ConstraintCache",
    "JsonSchemaConfig",
    "allocate_token_bitmask",
    "allowed_token_ids_from_bitmask",
    "fill_token_bitmasks",
    "vocabulary_from_hf",
    "vocabulary_from_tiktoken",
]
