"""`POST /encode` (also PUT): SGLang's native embedding route, on a server started with
`--is-embedding`.

    {"text": str | [str]} or {"input_ids": [int] | [[int]]}, optional "rid" (str | [str])
    -> {"embedding": [float], "meta_info": {...}}, or a list of them for a batch

`embedding_inputs` also reads `/v1/embeddings`' `input`: both take text or token ids, one or a
list. Bad input is a 400 naming the field; more prompts than `max_sequences_per_request`, or a
text longer than any that fits the context, is refused before anything is tokenized.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, json_type, read_json_object
from sglr.server.native.tokenize import check_batch_size
from sglr.server.state import ServerState

_ENCODE_FIELDS = frozenset({"text", "input_ids", "rid"})


class EmbeddingInputs:
    """What to embed: texts or id lists (one kind per request), and whether it was a batch."""

    def __init__(self, texts: list[str] | None, id_lists: list[list[int]] | None, is_batch: bool) -> None:
        self.texts = texts
        self.id_lists = id_lists
        self.is_batch = is_batch

    def engine_args(self) -> dict[str, Any]:
        if self.texts is not None:
            return {"prompt": self.texts if self.is_batch else self.texts[0]}
        assert self.id_lists is not None
        return {"input_ids": self.id_lists if self.is_batch else self.id_lists[0]}


def embedding_inputs(state: ServerState, value: Any, field: str) -> EmbeddingInputs:
    """Text, a list of texts, a list of token ids or a list of id lists (not mixed)."""
    if isinstance(value, str):
        inputs = EmbeddingInputs([value], None, False)
    elif not isinstance(value, list):
        expected = "a string, a list of strings, a list of token ids or a list of such lists"
        raise ApiError.bad_request(f"{field} must be {expected}, got {json_type(value)}", field)
    elif not value:
        raise ApiError.bad_request(f"{field} is an empty list; give the text or token ids to embed", field)
    elif all(isinstance(item, str) for item in value):
        inputs = EmbeddingInputs(list(value), None, True)
    elif all(_is_id(item) for item in value):
        inputs = EmbeddingInputs(None, [list(value)], False)
    elif all(isinstance(item, list) and item and all(_is_id(t) for t in item) for item in value):
        inputs = EmbeddingInputs(None, [list(item) for item in value], True)
    else:
        raise ApiError.bad_request(
            f"{field} must be one kind: strings, token ids, or non-empty lists of token ids (not mixed)",
            field,
        )
    check_batch_size(state, len(inputs.texts or inputs.id_lists or []), field)
    for text in inputs.texts or []:  # the limit /generate has: longer cannot fit the context
        state.engine.check_prompt_text(text, field)
    return inputs


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


async def encode(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, _ENCODE_FIELDS, "the /encode request")
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if has_text == has_ids:
        raise ApiError.bad_request("give exactly one of text or input_ids", "text")
    field = "text" if has_text else "input_ids"
    inputs = embedding_inputs(state, body[field], field)
    if (inputs.texts is None) == has_text:
        expected = "a string or a list of strings" if has_text else "token ids or a list of id lists"
        raise ApiError.bad_request(f"{field} must be {expected}", field)
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, (str, list)):
        raise ApiError.bad_request(f"rid must be a string or a list of strings, got {json_type(rid)}", "rid")
    result = await state.engine.async_encode(**inputs.engine_args(), rid=rid)
    return JSONOut(result)
