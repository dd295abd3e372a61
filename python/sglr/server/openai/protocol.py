"""The OpenAI protocol that chat and completions share: a validated request (known fields, the
model, stream options, `n`, response ids) and the shapes of its answers (a whole response with
its choices and usage, stream chunks, finish reasons, logprobs). Sampling fields are read by
`sampling.py`; each route's own fields by its module.

Streams send chunks under one response header, with `usage` in every chunk when
`stream_options.include_usage` asks for it (null unless `continuous_usage_stats`) and a last
chunk holding only the usage.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sglr.http.errors import ApiError
from sglr.http.request import check_known_fields, get_bool, get_dict, get_int, get_str, require_null
from sglr.server.generation_response import DeltaRenderer
from sglr.server.openai.models import resolve_model
from sglr.server.openai.sampling import sampling_params
from sglr.server.param_names import ParamNames
from sglr.server.state import ServerState

# -- ids, choices, finish reasons, usage, logprobs --------------------------------------


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


# -- the request ---------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOptions:
    include_usage: bool = False
    continuous_usage_stats: bool = False


class OpenAIRequest:
    """A validated OpenAI request. A route's subclass reads its own fields after `__init__`, then
    calls `_read_sampling` and `_number_choices`, in that order (which fields are read first
    decides which error a request with several mistakes gets)."""

    params: dict[str, Any]
    names: ParamNames
    layout: ChoiceLayout
    ids: ResponseIds

    def __init__(
        self,
        state: ServerState,
        body: dict[str, Any],
        known: frozenset[str],
        unsupported: dict[str, str],
        where: str,
    ) -> None:
        """`known`: the route's fields; `unsupported`: field -> why it is refused unless empty;
        `where` names the request in messages."""
        check_known_fields(body, known, where)
        for name, reason in unsupported.items():
            require_null(body, name, reason)
        self.model, self.lora_path, self.lora_field = _model_and_adapter(state, body)
        self.priority = get_int(body, "priority", None)  # SGLang's extension (docs/scheduling.md)

    def _read_sampling(
        self, body: dict[str, Any], max_tokens: int | None, max_tokens_field: str, prompt_field: str
    ) -> None:
        """`prompt_field`: the request field the prompt comes from (engine errors about the
        prompt name it)."""
        self.stream = bool(get_bool(body, "stream", False))
        self.options = _stream_options(body, self.stream)
        sampling = sampling_params(body, max_tokens, max_tokens_field)
        self.params = sampling.params
        self.names = dataclasses.replace(sampling.names, prompt=prompt_field, lora=self.lora_field)

    def _number_choices(self, body: dict[str, Any], num_prompts: int, id_prefix: str) -> None:
        self.layout = ChoiceLayout(num_prompts, self.params["n"])
        self.ids = ResponseIds(id_prefix, get_str(body, "rid"))

    def header(self, kind: str) -> dict[str, Any]:
        return {"id": self.ids.response_id, "object": kind, "created": self.ids.created, "model": self.model}

    def whole_response(
        self,
        kind: str,
        results: list[dict[str, Any]],
        content: Callable[[int, dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """The non-stream response; `content(sequence, result)` gives a choice's own fields."""
        choices: list[dict[str, Any]] = [{}] * self.layout.num_sequences
        for sequence, result in enumerate(results):
            reason = result["meta_info"].get("finish_reason")
            index = self.layout.choice_of(sequence)
            choices[index] = {
                "index": index,
                **content(sequence, result),
                "finish_reason": finish_reason(reason),
                "matched_stop": matched_stop(reason),
            }
        metas = [r["meta_info"] for r in results]
        return {**self.header(kind), "choices": choices, "usage": usage(metas, self.layout)}


def _model_and_adapter(state: ServerState, body: dict[str, Any]) -> tuple[str, Any, str]:
    """The `model` to echo back, the engine's `lora_path` (None: the base model) and the request
    field it came from. The adapter is SGLang's `lora_path` extension when given (a name, or on
    completions one per prompt), else the one `model` names; both naming different adapters is
    a 400, a `model` that names nothing served a 404."""
    model = get_str(body, "model")
    echoed = state.engine.served_model_name if model is None else model
    adapter = resolve_model(state, model) if model is not None else None
    lora_path = body.get("lora_path")
    if lora_path is None:
        return echoed, None if adapter is None else adapter.name, "model"
    if adapter is not None and lora_path != adapter.name:
        raise ApiError.bad_request(
            f"lora_path and model `{model}` name different LoRA adapters (model: `{adapter.name}`)",
            "lora_path",
        )
    return echoed, lora_path, "lora_path"


def _stream_options(body: dict[str, Any], stream: bool) -> StreamOptions:
    raw = get_dict(body, "stream_options")
    if raw is None:
        return StreamOptions()
    if not stream:
        raise ApiError.bad_request("stream_options is only allowed when stream is true", "stream_options")
    unknown = sorted(set(raw) - {"include_usage", "continuous_usage_stats"})
    if unknown:
        raise ApiError.bad_request(
            f"unknown field `{unknown[0]}` in stream_options", f"stream_options.{unknown[0]}"
        )
    return StreamOptions(
        include_usage=bool(get_bool(raw, "include_usage", False, "stream_options")),
        continuous_usage_stats=bool(get_bool(raw, "continuous_usage_stats", False, "stream_options")),
    )


# -- streams ---------------------------------------------------------------------------


class OpenAIChunks(DeltaRenderer):
    """A route's subclass turns one delta into its choices (`choices_of`)."""

    def __init__(self, req: OpenAIRequest, kind: str) -> None:
        self.req = req
        self.header = req.header(kind)
        # Each sequence's counts as last reported, for `usage`.
        self.metas: list[dict[str, Any]] = [{} for _ in range(req.layout.num_sequences)]

    def choices_of(self, sequence: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def on_delta(self, delta: dict[str, Any]) -> list[Any]:
        sequence = delta["index"]
        self.metas[sequence] = {**self.metas[sequence], **delta["meta_info"]}
        return [self.chunk(choice) for choice in self.choices_of(sequence, delta)]

    def chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        payload = {**self.header, "choices": [choice]}
        options = self.req.options
        if options.include_usage:
            payload["usage"] = self.current_usage() if options.continuous_usage_stats else None
        return payload

    def current_usage(self) -> dict[str, Any]:
        """The usage of what was streamed so far (a subclass may add its counts)."""
        return usage(self.metas, self.req.layout)

    def closing(self) -> list[Any]:
        if not self.req.options.include_usage:
            return []
        return [{**self.header, "choices": [], "usage": self.current_usage()}]
