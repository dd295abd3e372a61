"""Tokenizer -> `Vocabulary` (token id -> bytes), for Hugging Face and tiktoken tokenizers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sglr._core import Vocabulary


def vocabulary_from_tiktoken(encoding: Any, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
    """A vocabulary from a `tiktoken.Encoding`: ranks hold raw bytes; special tokens and
    unused ids are never allowed; EOS defaults to the encoding's end-of-text token."""
    special_ids = {encoding.encode_single_token(token) for token in encoding.special_tokens_set}
    tokens: list[bytes | None] = []
    for token_id in range(encoding.n_vocab):
        if token_id in special_ids:
            tokens.append(None)
            continue
        try:
            tokens.append(encoding.decode_single_token_bytes(token_id))
        except KeyError:
            tokens.append(None)
    eos = list(eos_token_ids) if eos_token_ids is not None else [encoding.eot_token]
    return Vocabulary(tokens, eos, encoding="utf8")


def vocabulary_from_hf(tokenizer: Any, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
    """A vocabulary from a Hugging Face tokenizer (`transformers` tokenizer or a
    `tokenizers.Tokenizer`).

    Detects how token strings encode bytes: byte-level BPE (GPT-2 alphabet), sentencepiece
    (`▁`, `<0xNN>` byte fallback) or plain UTF-8. Special added tokens are excluded; other
    added tokens stand for their literal text. EOS defaults to `tokenizer.eos_token_id`.
    """
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if hasattr(backend, "get_vocab") and not hasattr(tokenizer, "convert_ids_to_tokens"):
        vocab: dict[str, int] = backend.get_vocab(with_added_tokens=True)
        added = backend.get_added_tokens_decoder()
    else:
        vocab = tokenizer.get_vocab()
        added = getattr(tokenizer, "added_tokens_decoder", {})
    vocab_size = max(vocab.values(), default=-1) + 1
    if hasattr(tokenizer, "__len__"):
        vocab_size = max(vocab_size, len(tokenizer))
    encoding = detect_encoding(tokenizer, vocab)
    tokens: list[bytes | str | None] = [None] * vocab_size
    for text, token_id in vocab.items():
        tokens[token_id] = text
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    for token_id, token in added.items():
        content = getattr(token, "content", str(token))
        if getattr(token, "special", False) or token_id in special_ids:
            tokens[token_id] = None
        else:
            # Added tokens match their literal text; they are not in the byte alphabet.
            tokens[token_id] = content.encode("utf-8")
    for token_id in special_ids:
        if 0 <= token_id < vocab_size:
            tokens[token_id] = None
    if eos_token_ids is None:
        eos_id = getattr(tokenizer, "eos_token_id", None)
        eos_token_ids = [] if eos_id is None else [eos_id]
    return Vocabulary(tokens, list(eos_token_ids), encoding=encoding)


def detect_encoding(tokenizer: Any, vocab: dict[str, int]) -> str:
    """'byte_level', 'sentencepiece' or 'utf8', from the tokenizer's decoder configuration,
    falling back to the characters its tokens use."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    to_str = getattr(backend, "to_str", None)
    if to_str is not None:
        config = json.loads(to_str())
        kinds = _component_types(config.get("decoder")) | _component_types(config.get("pre_tokenizer"))
        if "ByteLevel" in kinds:
            return "byte_level"
        if (
            "ByteFallback" in kinds
            or "Metaspace" in kinds
            or (config.get("model") or {}).get("byte_fallback")
        ):
            return "sentencepiece"
    sample = list(vocab)[:5000]
    if sum("\u0120" in t or "\u010a" in t for t in sample) > len(sample) // 100:
        return "byte_level"
    if any("\u2581" in t for t in sample) or any(t.startswith("<0x") for t in sample):
        return "sentencepiece"
    return "utf8"


def _component_types(component: Any) -> set[str]:
    """Types of a tokenizer.json component and of its nested `Sequence` members."""
    if not isinstance(component, dict):
        return set()
    kinds = {component.get("type", "")}
    for key in ("decoders", "pretokenizers"):
        for member in component.get(key) or []:
            kinds |= _component_types(member)
    return kinds
