"""`GET /v1/models` and `GET /v1/models/{model}`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.server.state import ServerState


def _card(state: ServerState) -> dict[str, Any]:
    engine = state.engine
    return {
        "id": engine.served_model_name,
        "object": "model",
        "created": int(state.started_at),
        "owned_by": "sglr",
        "root": engine.model_path,
        "parent": None,
        "max_model_len": engine.context_len,
    }


async def list_models(state: ServerState, request: Request) -> Response:
    return JSONOut({"object": "list", "data": [_card(state)]})


async def get_model(state: ServerState, request: Request) -> Response:
    name = request.path_params["model"]
    if name not in state.model_names:
        raise ApiError(404, f"The model '{name}' does not exist", "model")
    return JSONOut(_card(state))
