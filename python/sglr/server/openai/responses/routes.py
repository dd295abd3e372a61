"""The Responses routes: `POST /v1/responses` (whole or streamed), `GET` and `DELETE
/v1/responses/{response_id}`, `GET /v1/responses/{response_id}/input_items` (the conversation's
input items, a page at a time), and `POST /v1/responses/{response_id}/cancel` (a 400: only
background responses can be cancelled, and this server runs none)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import read_json_object
from sglr.server.generation import start_generation
from sglr.server.generation_response import json_response, stream_response
from sglr.server.openai.chat import chat_response
from sglr.server.openai.responses.events import ResponseEvents
from sglr.server.openai.responses.output import whole_response
from sglr.server.openai.responses.request import ResponsesRequest
from sglr.server.openai.responses.store import StoredResponse
from sglr.server.state import ServerState

_MAX_PAGE = 100


async def create_response(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    req = ResponsesRequest(state, body)
    chat = req.chat
    gen = await start_generation(state, chat.engine_kwargs(), chat.names)

    def done(response: dict[str, Any]) -> dict[str, Any]:
        if req.store:
            state.responses.put(response, req.conversation_items)
        return response

    if req.stream:
        return await stream_response(request, gen, ResponseEvents(req, done))
    return await json_response(
        request, gen, lambda results: done(whole_response(req, chat_response(chat, results)))
    )


def _stored(state: ServerState, request: Request) -> tuple[str, StoredResponse]:
    response_id = request.path_params["response_id"]
    stored = state.responses.get(response_id)
    if stored is None:
        raise ApiError(404, f"no stored response with id {response_id!r}", "response_id")
    return response_id, stored


async def get_response(state: ServerState, request: Request) -> Response:
    _, stored = _stored(state, request)
    return JSONOut(stored.response)


async def list_input_items(state: ServerState, request: Request) -> Response:
    """OpenAI's list page: `limit` (1-100, 20), `order` (`desc`, newest first, or `asc`), `after`
    (an item id: the items after it in that order)."""
    _, stored = _stored(state, request)
    query = request.query_params
    raw_limit = query.get("limit", "20")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= _MAX_PAGE:
        raise ApiError.bad_request(
            f"limit must be an integer in [1, {_MAX_PAGE}], got {raw_limit!r}", "limit"
        )
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError.bad_request(f'order must be "asc" or "desc", got {order!r}', "order")
    items = stored.input_items if order == "asc" else stored.input_items[::-1]
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise ApiError.bad_request(f"no input item with id {after!r} in this response", "after")
        items = items[ids.index(after) + 1 :]
    page = items[: int(raw_limit)]
    return JSONOut(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > len(page),
        }
    )


async def delete_response(state: ServerState, request: Request) -> Response:
    response_id, _ = _stored(state, request)
    state.responses.delete(response_id)
    return JSONOut({"id": response_id, "object": "response", "deleted": True})


async def cancel_response(state: ServerState, request: Request) -> Response:
    _stored(state, request)
    raise ApiError.bad_request(
        "only a response created with background: true can be cancelled (this server runs none in the background)",
        "response_id",
    )
