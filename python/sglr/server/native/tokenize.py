"""`POST /tokenize` and `POST /detokenize` (also under `/v1/`): SGLang's tokenizer utilities,
through the engine's own tokenizer, so the ids are the ones `/generate` would see.

    /tokenize    {"prompt": str | [str], "add_special_tokens": true, "model": ...}
              -> {"tokens": [int] | [[int]], "count": int | [int], "max_model_len": int}
    /detokenize  {"tokens": [int] | [[int]], "model": ...}
              -> {"text": str | [str]}

A list of prompts (or of id lists) answers with lists in the same order. Detokenizing keeps
special tokens in the text (SGLang's `decode` does too), so ids round-trip to the text they
came from. `model`, when given, must name what this server serves (as on the OpenAI routes).
Bad input is a 400 naming the field; a prompt longer than any that fits the context, or more
prompts than `max_sequences_per_request`, is refused before anything is tokenized.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.errors import InvalidRequestError, LimitExceededError
from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_bool, json_type, read_json_object
from sglr.server.openai.models import resolve_model
from sglr.server.state import ServerState

_TOKENIZE_FIELDS = frozenset({"model", "prompt", "add_special_tokens"})
_DETOKENIZE_FIELDS = frozenset({"model", "tokens"})


async def tokenize(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, _TOKENIZE_FIELDS, "the /tokenize request")
    _check_model(state, body)
    add_special_tokens = get_bool(body, "add_special_tokens", True)
    prompts, is_batch = _prompts(body.get("prompt"))
    check_batch_size(state, len(prompts), "prompt")
    engine = state.engine
    for prompt in prompts:  # the limit /generate has: longer cannot fit the context
        engine.check_prompt_text(prompt, "prompt")
    # Off the event loop: a batch near the body limit takes a while to tokenize.
    tokens = await asyncio.to_thread(_encode_all, engine.tokenizer, prompts, bool(add_special_tokens))
    counts = [len(ids) for ids in tokens]
    return JSONOut(
        {
            "tokens": tokens if is_batch else tokens[0],
            "count": counts if is_batch else counts[0],
            "max_model_len": engine.context_len,
        }
    )


async def detokenize(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, _DETOKENIZE_FIELDS, "the /detokenize request")
    _check_model(state, body)
    tokenizer = state.engine.tokenizer
    id_lists, is_batch = _token_lists(body.get("tokens"), tokenizer.vocab_size)
    check_batch_size(state, len(id_lists), "tokens")
    texts = await asyncio.to_thread(
        lambda: [tokenizer.decode(ids, skip_special_tokens=False) for ids in id_lists]
    )
    return JSONOut({"text": texts if is_batch else texts[0]})


def _check_model(state: ServerState, body: dict[str, Any]) -> None:
    """`model` is optional; given, it must be a name of the base model or of a loaded adapter
    (they share the tokenizer). An unknown one is a 404 `model_not_found`."""
    model = body.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise ApiError.bad_request(f"model must be a string, got {json_type(model)}", "model")
    resolve_model(state, model)


def _prompts(value: Any) -> tuple[list[str], bool]:
    """The prompts to tokenize and whether the request was a batch."""
    if isinstance(value, str):
        return [value], False
    if isinstance(value, list):
        if not value:
            raise ApiError.bad_request(
                "prompt is an empty list; give a string or a list of strings", "prompt"
            )
        for item in value:
            if not isinstance(item, str):
                raise ApiError.bad_request(
                    f"prompt must be a string or a list of strings, got a list holding {json_type(item)}",
                    "prompt",
                )
        return list(value), True
    if value is None:
        raise ApiError.bad_request(
            "give the text to tokenize as prompt (a string or a list of strings)", "prompt"
        )
    raise ApiError.bad_request(
        f"prompt must be a string or a list of strings, got {json_type(value)}", "prompt"
    )


def _token_lists(value: Any, vocab_size: int) -> tuple[list[list[int]], bool]:
    """The id lists to decode and whether the request was a batch; each id in the vocabulary."""
    if value is None:
        raise ApiError.bad_request("give the token ids to detokenize as tokens", "tokens")
    if not isinstance(value, list):
        raise ApiError.bad_request(
            f"tokens must be a list of token ids or a list of such lists, got {json_type(value)}", "tokens"
        )
    if not value:
        raise ApiError.bad_request("tokens is an empty list; give token ids to detokenize", "tokens")
    is_batch = isinstance(value[0], list)
    lists = value if is_batch else [value]
    for ids in lists:
        if not isinstance(ids, list):
            raise ApiError.bad_request(
                "tokens mixes lists and ids; give one list of ids or a list of lists", "tokens"
            )
        for token in ids:
            if isinstance(token, bool) or not isinstance(token, int):
                raise ApiError.bad_request(
                    f"tokens must hold integer token ids, got {json_type(token)}", "tokens"
                )
            if not 0 <= token < vocab_size:
                raise ApiError.bad_request(
                    f"token id {token} is not in the vocabulary [0, {vocab_size - 1}]", "tokens"
                )
    return lists, is_batch


def check_batch_size(state: ServerState, size: int, field: str) -> None:
    """Refuses more entries than `max_sequences_per_request` (also `/encode`'s check)."""
    limit = state.settings.max_sequences_per_request
    if size > limit:
        raise LimitExceededError(
            f"{field} holds {size} entries, over the server's limit of {limit} per request",
            param=field,
            limit="max_sequences_per_request",
        )


def _encode_all(tokenizer: Any, prompts: list[str], add_special_tokens: bool) -> list[list[int]]:
    try:
        return [tokenizer.encode(prompt, add_special_tokens=add_special_tokens) for prompt in prompts]
    except InvalidRequestError as exc:  # the tokenizer names its input `text`; this route's is `prompt`
        raise InvalidRequestError(exc.message, "prompt") from exc
