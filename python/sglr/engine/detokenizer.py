"""Incremental detokenization: token ids in, complete UTF-8 text out, one step at a time.

Decoding a growing id list from scratch every step is quadratic, and decoding only the new ids
loses context (leading spaces of sentencepiece pieces, multi-token UTF-8 characters). Instead
each step decodes a short window that starts a few tokens back (`surrounding`) and emits what
the new ids added to it. A window ending in U+FFFD is an unfinished multi-byte character: its
text is held back until the next token completes it (or `flush` at the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

REPLACEMENT_CHAR = "\ufffd"
# Tokens of prompt context kept in front of the output so the first output token decodes with
# its real left neighbour.
CONTEXT_TOKENS = 5


class Decoder(Protocol):
    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


class IncrementalDetokenizer:
    def __init__(
        self, tokenizer: Decoder, prompt_ids: Sequence[int], skip_special_tokens: bool = True
    ) -> None:
        self._tokenizer = tokenizer
        self._skip_special_tokens = skip_special_tokens
        self._ids: list[int] = list(prompt_ids[-CONTEXT_TOKENS:])
        self._surrounding_offset = 0
        self._read_offset = len(self._ids)
        self.text = ""

    def _decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip_special_tokens)

    def append(self, new_ids: Sequence[int]) -> str:
        """Adds output tokens; returns the text they completed (possibly empty)."""
        self._ids.extend(new_ids)
        return self._advance(final=False)

    def flush(self) -> str:
        """Emits whatever is held back (an unfinished character decodes as U+FFFD)."""
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read_offset == len(self._ids):
            return ""
        surrounding = self._decode(self._ids[self._surrounding_offset : self._read_offset])
        window = self._decode(self._ids[self._surrounding_offset :])
        if not final and window.endswith(REPLACEMENT_CHAR):
            return ""
        new_text = window[len(surrounding) :]
        self._surrounding_offset = self._read_offset
        self._read_offset = len(self._ids)
        # Keep the window short: the ids before the surrounding offset are never decoded again.
        if self._surrounding_offset > 4 * CONTEXT_TOKENS:
            drop = self._surrounding_offset - CONTEXT_TOKENS
            del self._ids[:drop]
            self._surrounding_offset -= drop
            self._read_offset -= drop
        self.text += new_text
        return new_text
