"""An engine stand-in that streams the same scripted deltas for every request: for server
behaviour a real engine cannot be made to show on demand (a failure after some output)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

from sglr.engine.finish import FinishAbort

PROMPT_TOKENS = 3


def text_delta(text: str, output_ids: list[int]) -> dict[str, Any]:
    meta = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": len(output_ids), "cached_tokens": 0}
    return {"text": text, "output_ids": output_ids, "meta_info": {**meta, "finish_reason": None}}


def abort_delta(error: Exception, completion_tokens: int) -> dict[str, Any]:
    meta = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": completion_tokens, "cached_tokens": 0}
    return {"text": "", "output_ids": [], "meta_info": {**meta, "finish_reason": FinishAbort(error)}}


class _Tokenizer:
    chat_template = "{% for m in messages %}{{ m.content }} {% endfor %}"

    def apply_chat_template(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        return " ".join(str(m["content"]) for m in messages)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [1] * PROMPT_TOKENS

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "x" * len(ids)


class ScriptedEngine:
    served_model_name = "scripted"
    model_path = "/models/scripted"
    context_len = 128
    is_alive = True

    def __init__(self, deltas: list[dict[str, Any]]) -> None:
        self.deltas = deltas
        self.tokenizer = _Tokenizer()
        self.takes_images = False

    def check_prompt_text(self, text: str, field: str) -> None:
        pass  # every prompt fits

    async def async_generate(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        assert kwargs["stream"], "the server always streams from the engine"
        return self._stream()

    async def _stream(self) -> AsyncIterator[dict[str, Any]]:
        for delta in self.deltas:
            yield copy.deepcopy(delta)
