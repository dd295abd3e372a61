"""The model's tokenizer as the engine uses it: encode, decode, chat template, stop ids."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sglr.errors import InvalidRequestError, ModelNotFoundError


class EngineTokenizer:
    """Wraps a Hugging Face fast tokenizer loaded from a model directory."""

    def __init__(self, model_dir: str | Path, chat_template: str | None = None) -> None:
        from transformers import AutoTokenizer

        model_dir = Path(model_dir)
        try:
            self.hf = AutoTokenizer.from_pretrained(str(model_dir))
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(f"cannot load a tokenizer from {model_dir}: {exc}") from exc
        if chat_template is not None:
            self.hf.chat_template = _read_template(chat_template)
        self.eos_token_ids = frozenset(_eos_ids(model_dir, self.hf))
        self.vocab_size = len(self.hf)
        # The Rust tokenizer's own decode, when `hf.decode` would return exactly its result:
        # streaming decodes every token a few times, and the Python wrapper around it costs
        # more than the decoding.
        backend = getattr(self.hf, "_tokenizer", None)
        cleans_up = getattr(self.hf, "clean_up_tokenization_spaces", False)
        self._rust_decode = backend.decode if backend is not None and not cleans_up else None
        # Loading parses tokenizer.json in Python too: ~25 MB of freed heap (SmolLM2) that glibc
        # would otherwise keep resident.
        from sglr.model.loader import release_freed_heap

        release_freed_heap()

    @functools.cached_property
    def longest_token_chars(self) -> int:
        """Characters in the text of the vocabulary's longest token: no token covers more of a
        text (a byte-level token's character is one byte, and a text's character at least one)."""
        return max((len(token) for token in self.hf.get_vocab()), default=1)

    @property
    def chat_template(self) -> str | None:
        return self.hf.chat_template

    def is_special_token_text(self, text: str) -> bool:
        """Whether `text` is one special token (dropped from text by `skip_special_tokens`)."""
        return any(t.special and t.content == text for t in self.hf.added_tokens_decoder.values())

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """`add_special_tokens=False` for text that already holds them (a rendered chat template)."""
        try:
            return self.hf.encode(text, add_special_tokens=add_special_tokens)
        except TypeError:
            # The Rust tokenizer refuses str values that are not valid Unicode: lone surrogates,
            # which JSON escapes ("\ud800") can carry.
            if _has_lone_surrogate(text):
                raise InvalidRequestError(
                    "the text contains a lone UTF-16 surrogate (not valid Unicode)", param="text"
                ) from None
            raise

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        if self._rust_decode is not None:
            return self._rust_decode(token_ids, skip_special_tokens=skip_special_tokens)
        return self.hf.decode(token_ids, skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, token_ids: Sequence[int]) -> list[str]:
        return self.hf.convert_ids_to_tokens(list(token_ids))

    def apply_chat_template(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any
    ) -> str:
        """Renders chat messages to the prompt text the model was trained on."""
        if not self.hf.chat_template:
            raise InvalidRequestError(
                "this model's tokenizer has no chat template; pass one with --chat-template", param="messages"
            )
        try:
            return self.hf.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
            )
        except Exception as exc:  # jinja errors from the template itself
            raise InvalidRequestError(f"cannot apply the chat template: {exc}", param="messages") from exc


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _read_template(template: str) -> str:
    """`template` is a Jinja string or a path to a file holding one (.jinja or a tokenizer_config.json)."""
    path = Path(template)
    try:
        is_file = len(template) < 4096 and path.is_file()
    except OSError:  # not a usable path (a component longer than a file name may be): template text
        is_file = False
    if is_file:
        text = path.read_text()
        if path.suffix == ".json":
            return json.loads(text)["chat_template"]
        return text
    return template


def _eos_ids(model_dir: Path, hf: Any) -> set[int]:
    ids: set[int] = set()
    if hf.eos_token_id is not None:
        ids.add(int(hf.eos_token_id))
    for name in ("generation_config.json", "config.json"):
        path = model_dir / name
        if path.is_file():
            value = json.loads(path.read_text()).get("eos_token_id")
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list):
                ids.update(int(v) for v in value)
    return ids
