"""`/v1/batches`: OpenAI's Batch API over this server's routes.

POST /v1/batches   {"input_file_id", "endpoint", "completion_window": "24h", "metadata"}
GET  /v1/batches[?limit=&after=]      -> newest first: {"object": "list", "data", "has_more", ...}
GET  /v1/batches/{batch_id}           -> the batch object (status, request_counts, file ids)
POST /v1/batches/{batch_id}/cancel    -> the batch, cancelling (then cancelled)
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_dict, get_str, read_json_object
from sglr.server.openai.batches.execute import ENDPOINTS
from sglr.server.openai.batches.files_api import service_of
from sglr.server.state import ServerState

_FIELDS = frozenset({"input_file_id", "endpoint", "completion_window", "metadata"})
# OpenAI's bounds on a batch's metadata.
_MAX_METADATA_PAIRS = 16
_MAX_METADATA_KEY_CHARS = 64
_MAX_METADATA_VALUE_CHARS = 512
_MAX_LIST_LIMIT = 100


async def create_batch(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, _FIELDS, "the batch request")
    input_file_id = get_str(body, "input_file_id")
    if not input_file_id:
        raise ApiError.bad_request("give the id of an uploaded file as input_file_id", "input_file_id")
    endpoint = get_str(body, "endpoint")
    if endpoint not in ENDPOINTS:
        raise ApiError.bad_request(
            f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}", "endpoint"
        )
    window = get_str(body, "completion_window", "24h")
    if window != "24h":
        raise ApiError.bad_request(f"completion_window must be '24h', got {window!r}", "completion_window")
    metadata = _metadata(get_dict(body, "metadata"))
    return JSONOut(service_of(state).create_batch(input_file_id, endpoint, metadata))


def _metadata(metadata: dict[str, Any] | None) -> dict[str, str] | None:
    if metadata is None:
        return None
    if len(metadata) > _MAX_METADATA_PAIRS:
        raise ApiError.bad_request(f"metadata has at most {_MAX_METADATA_PAIRS} pairs", "metadata")
    for key, value in metadata.items():
        if len(key) > _MAX_METADATA_KEY_CHARS:
            raise ApiError.bad_request(
                f"metadata keys have at most {_MAX_METADATA_KEY_CHARS} characters", "metadata"
            )
        if not isinstance(value, str) or len(value) > _MAX_METADATA_VALUE_CHARS:
            raise ApiError.bad_request(
                f"metadata.{key} must be a string of at most {_MAX_METADATA_VALUE_CHARS} characters",
                f"metadata.{key}",
            )
    return metadata


async def get_batch(state: ServerState, request: Request) -> Response:
    return JSONOut(service_of(state).batch(request.path_params["batch_id"]))


async def list_batches(state: ServerState, request: Request) -> Response:
    raw_limit = request.query_params.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise ApiError.bad_request(f"limit must be an integer, got {raw_limit!r}", "limit") from None
    if not 1 <= limit <= _MAX_LIST_LIMIT:
        raise ApiError.bad_request(f"limit must be in [1, {_MAX_LIST_LIMIT}], got {limit}", "limit")
    after = request.query_params.get("after") or None
    store = service_of(state).store()
    data, has_more = store.batches(limit, after) if store is not None else ([], False)
    first_id = data[0]["id"] if data else None
    last_id = data[-1]["id"] if data else None
    return JSONOut(
        {"object": "list", "data": data, "first_id": first_id, "last_id": last_id, "has_more": has_more}
    )


async def cancel_batch(state: ServerState, request: Request) -> Response:
    return JSONOut(service_of(state).cancel(request.path_params["batch_id"]))
