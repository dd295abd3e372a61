"""SGLang's session routes: `POST /open_session` `{"capacity_of_str_len", "session_id"?}`
answers the session's id (a JSON string), `POST /close_session` `{"session_id"}` an empty 200.
A `/generate` request joins a session with `session_params` (`engine/sessions.py`,
docs/scheduling.md). Errors are 400s naming the field (an unknown session, an id already open,
`max_sessions` reached)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.errors import InvalidRequestError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_int, get_str, read_json_object
from sglr.server.state import ServerState


async def open_session(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, {"capacity_of_str_len", "session_id"}, "the /open_session request")
    capacity = get_int(body, "capacity_of_str_len", None, minimum=1)
    if capacity is None:
        raise InvalidRequestError(
            "capacity_of_str_len is required (a positive integer)", "capacity_of_str_len"
        )
    session_id = get_str(body, "session_id")
    opened = await asyncio.to_thread(_engine_sessions(state).open_session, capacity, session_id)
    return JSONOut(opened)


async def close_session(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, {"session_id"}, "the /close_session request")
    session_id = get_str(body, "session_id")
    if not session_id:
        raise InvalidRequestError("session_id is required (a non-empty string)", "session_id")
    await asyncio.to_thread(_engine_sessions(state).close_session, session_id)
    return Response(status_code=200)


def _engine_sessions(state: ServerState) -> Any:
    """The engine, when it keeps sessions (replicas behind `--dp-size` do not share them)."""
    if not hasattr(state.engine, "open_session"):
        raise InvalidRequestError("sessions need a single engine replica (--dp-size 1)", "session_id")
    return state.engine
