"""Fixtures for the engine tests: small tokenizers trained locally (no downloads)."""

from __future__ import annotations

import inspect
import json
import string

import pytest


def stdlib_text() -> list[str]:
    """Training text every machine has: source and docstrings of a few stdlib modules."""
    import argparse
    import collections
    import json as json_module

    lines: list[str] = []
    for module in (json_module, argparse, collections):
        lines += inspect.getsource(module).splitlines()
    lines += [json.dumps({"name": "Ada", "age": 36, "tags": ["x", "y"], "ok": True})] * 50
    lines += ["caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600 \u00fcber"] * 20
    return lines


@pytest.fixture(scope="session")
def byte_level_tokenizer():
    """A byte-level BPE tokenizer (GPT-2 alphabet) with an EOS special token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(stdlib_text(), trainer)
    return tokenizer


@pytest.fixture(scope="session")
def sentencepiece_tokenizer():
    """A sentencepiece-style BPE with `▁` spaces and `<0xNN>` byte fallback."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += ["\u2581", *string.ascii_letters, *string.digits, *string.punctuation]
    pieces += ["\u2581t", "he", "\u2581the", "\u2581a", "\u00e9"]
    vocab = {piece: index for index, piece in enumerate(dict.fromkeys(pieces))}
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("\u2581", "a")]
    model = models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tokenizer.add_special_tokens(["<s>", "</s>"])
    return tokenizer


@pytest.fixture(scope="session")
def hf_byte_level(byte_level_tokenizer):
    """The byte-level tokenizer as `transformers` would load it."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=byte_level_tokenizer, eos_token="<|endoftext|>")


@pytest.fixture(scope="session")
def hf_sentencepiece(sentencepiece_tokenizer):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=sentencepiece_tokenizer, eos_token="</s>")
