"""`POST /v1/embeddings`: OpenAI's embeddings route, on a server started with `--is-embedding`.

    {"input": str | [str] | [int] | [[int]], "model": ..., "encoding_format": "float" | "base64",
     "dimensions": int, "user": str}
    -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}],
        "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}

"base64" is the embedding's little-endian float32 bytes, base64-encoded (what the `openai`
client decodes). `dimensions` is accepted only when it is the model's embedding size: sglr does
not shorten embeddings (no Matryoshka declaration support).
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_int, get_str, read_json_object
from sglr.server.native.encode import embedding_inputs
from sglr.server.openai.models import resolve_model
from sglr.server.state import ServerState

# `priority`: SGLang's scheduling hint (a batch's lines carry one), accepted and not used here.
_FIELDS = frozenset({"input", "model", "encoding_format", "dimensions", "user", "priority"})
_FORMATS = ("float", "base64")


async def embeddings(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    return await answer_embeddings(state, body)


async def answer_embeddings(state: ServerState, body: dict[str, Any]) -> Response:
    """The route after the body is read (a batch's lines come here too, `openai.batches`)."""
    check_known_fields(body, _FIELDS, "the embeddings request")
    model = get_str(body, "model")
    if model is not None and resolve_model(state, model) is not None:
        raise ApiError.bad_request("embeddings run on the base model, not on a LoRA adapter", "model")
    get_str(body, "user")
    encoding = get_str(body, "encoding_format", "float")
    if encoding not in _FORMATS:
        raise ApiError.bad_request(
            f"encoding_format must be 'float' or 'base64', got {encoding!r}", "encoding_format"
        )
    dimensions = get_int(body, "dimensions", None, minimum=1)
    embedding_model = getattr(state.engine, "embedding_model", None)
    size = embedding_model.dimensions if embedding_model is not None else None
    if dimensions is not None and size is not None and dimensions != size:
        raise ApiError.bad_request(
            f"dimensions {dimensions} is not this model's embedding size {size}: sglr does not shorten embeddings",
            "dimensions",
        )
    if "input" not in body:
        raise ApiError.bad_request("give the text or token ids to embed as input", "input")
    inputs = embedding_inputs(state, body["input"], "input")
    result = await state.engine.async_encode(**inputs.engine_args())
    results = result if isinstance(result, list) else [result]
    prompt_tokens = sum(int(r["meta_info"]["prompt_tokens"]) for r in results)
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(r["embedding"], encoding)}
        for i, r in enumerate(results)
    ]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    served = model if model is not None else state.engine.served_model_name
    return JSONOut({"object": "list", "data": data, "model": served, "usage": usage})


def _encoded(embedding: list[float], encoding: str | None) -> Any:
    if encoding == "base64":
        return base64.b64encode(np.asarray(embedding, dtype="<f4").tobytes()).decode("ascii")
    return embedding
