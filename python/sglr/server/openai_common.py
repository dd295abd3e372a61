"""Pieces shared by the OpenAI-compatible routes: response ids, choice numbering, finish
reasons, usage and logprob formats."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResponseIds:
    """One response id for the whole request; engine request ids derive from it (or from a
    caller-given `rid`), so `/abort_request` can name them: the id itself for one choice,
    `<id>-<k>` for sequence k otherwise."""

    prefix: str
    rid: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        self.response_id = f"{self.prefix}-{uuid.uuid4().hex}"

    def request_ids(self, num_sequences: int) -> list[str]:
        base = self.rid or self.response_id
        return [base] if num_sequences == 1 else [f"{base}-{k}" for k in range(num_sequences)]


@dataclass(frozen=True)
class ChoiceLayout:
    """The engine orders sequences sample-major (sequence = sample * P + prompt); OpenAI numbers
    choices prompt-major (choice = prompt * n + sample)."""

    num_prompts: int
    n: int

    @property
    def num_sequences(self) -> int:
        return self.num_prompts * self.n

    def prompt_of(self, sequence: int) -> int:
        return sequence % self.num_prompts

    def choice_of(self, sequence: int) -> int:
        return self.prompt_of(sequence) * self.n + sequence // self.num_prompts


def finish_reason(reason: dict[str, Any] | None) -> str | None:
    if reason is None:
        return None
    return {"stop": "stop", "length": "length"}.get(reason.get("type", ""), "abort")


def matched_stop(reason: dict[str, Any] | None) -> str | int | None:
    return None if reason is None else reason.get("matched")


def usage(metas: list[dict[str, Any]], layout: ChoiceLayout) -> dict[str, Any]:
    """Prompt tokens count once per prompt (not once per sample); completions add up."""
    firsts = [metas[p] for p in range(layout.num_prompts) if p < len(metas)]
    prompt_tokens = sum(m.get("prompt_tokens", 0) for m in firsts)
    completion_tokens = sum(m.get("completion_tokens", 0) for m in metas)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": sum(m.get("cached_tokens", 0) for m in firsts)},
    }


def _token_text(entry: list[Any]) -> str:
    return entry[2] if entry[2] is not None else ""


def completion_logprobs(
    entries: list[list[Any]], tops: list[Any] | None, text_offset: int, num_top: int
) -> tuple[dict[str, Any], int]:
    """OpenAI's legacy completions logprobs for `entries` (`[logprob, id, text]`) and the text
    offset after them."""
    tokens, offsets = [], []
    for entry in entries:
        offsets.append(text_offset)
        text = _token_text(entry)
        tokens.append(text)
        text_offset += len(text)
    top_logprobs = None
    if num_top > 0:
        top_logprobs = [
            None if top is None else {_token_text(t): t[0] for t in top}
            for top in (tops or [None] * len(entries))
        ]
    payload = {
        "tokens": tokens,
        "token_logprobs": [entry[0] for entry in entries],
        "top_logprobs": top_logprobs,
        "text_offset": offsets,
    }
    return payload, text_offset


def chat_logprobs(entries: list[list[Any]], tops: list[Any] | None, num_top: int) -> dict[str, Any]:
    """OpenAI's chat logprobs (`{"content": [...]}`); `bytes` are the UTF-8 of each token's text."""
    content = []
    for k, entry in enumerate(entries):
        text = _token_text(entry)
        top = (tops[k] if tops is not None and k < len(tops) else None) or []
        content.append(
            {
                "token": text,
                "logprob": entry[0],
                "bytes": list(text.encode("utf-8")),
                "top_logprobs": [
                    {"token": _token_text(t), "logprob": t[0], "bytes": list(_token_text(t).encode("utf-8"))}
                    for t in top[:num_top]
                ],
            }
        )
    return {"content": content, "refusal": None}
