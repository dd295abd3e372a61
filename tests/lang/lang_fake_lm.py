"""A tiny deterministic character-level "language model" shared by the fake servers and the tests.

Tokens are printable ASCII characters (token id = code point; BOS = 1). The next-token
distribution depends on the previous character only: logits are a fixed hash of the pair.
Tests compute expected select decisions from `char_logprob` themselves.
"""

from __future__ import annotations

import math

BOS_ID = 1
VOCAB = [chr(code) for code in range(32, 127)] + ["\n"]


def _score(prev: str, char: str) -> float:
    return ((ord(prev) * 131 + ord(char) * 71) % 101) / 12.0


def log_softmax(prev: str, bias: dict[str, float] | None = None) -> dict[str, float]:
    logits = {c: _score(prev, c) + (bias or {}).get(c, 0.0) for c in VOCAB}
    top = max(logits.values())
    log_z = top + math.log(sum(math.exp(v - top) for v in logits.values()))
    return {c: v - log_z for c, v in logits.items()}


def char_logprob(prev: str, char: str) -> float:
    """log P(char | previous char); `prev` is "" at the start of the text (after BOS)."""
    return log_softmax(prev or "\x01")[char]


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def decode(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


class CharTokenizer:
    """The tokenizer of the fake LM, for `OpenAI(..., tokenizer=...)`."""

    def encode(self, text: str) -> list[int]:
        return encode(text)

    def decode(self, ids: list[int]) -> str:
        return decode(ids)
