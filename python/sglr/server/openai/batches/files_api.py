"""`/v1/files`: OpenAI's Files API, for batch input (`purpose` "batch", uploaded as
multipart/form-data) and the output and error files batches write (`purpose` "batch_output").

    POST   /v1/files                {file, purpose}    -> the file object
    GET    /v1/files[?purpose=]                        -> {"object": "list", "data": [...]}
    GET    /v1/files/{file_id}                         -> the file object
    GET    /v1/files/{file_id}/content                 -> its bytes
    DELETE /v1/files/{file_id}                         -> {"id", "object": "file", "deleted": true}
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import read_body
from sglr.server.openai.batches.multipart import parse_form
from sglr.server.openai.batches.service import BatchService
from sglr.server.state import ServerState

_PURPOSES = ("batch",)  # what a client may upload; "batch_output" files are the server's


def service_of(state: ServerState) -> BatchService:
    assert state.batches is not None  # build_app gives every server one
    return state.batches


async def create_file(state: ServerState, request: Request) -> Response:
    body = await read_body(request, state.settings.max_body_bytes)
    form = parse_form(request.headers.get("content-type"), body)
    purpose_part = form.get("purpose")
    purpose = purpose_part.data.decode("utf-8", "replace") if purpose_part is not None else None
    if purpose not in _PURPOSES:
        raise ApiError.bad_request(f"purpose must be 'batch', got {purpose!r}", "purpose")
    upload = form.get("file")
    if upload is None or upload.filename is None:
        raise ApiError.bad_request("give the file to upload as the form's `file` part", "file")
    return JSONOut(service_of(state).add_file(upload.filename, purpose, upload.data))


async def list_files(state: ServerState, request: Request) -> Response:
    store = service_of(state).store()
    purpose = request.query_params.get("purpose") or None
    data = store.files(purpose) if store is not None else []
    return JSONOut({"object": "list", "data": data, "has_more": False})


def _file(state: ServerState, request: Request) -> dict[str, Any]:
    file_id = request.path_params["file_id"]
    store = service_of(state).store()
    record = store.file(file_id) if store is not None else None
    if record is None:
        raise ApiError(404, f"no file with id {file_id!r}", "file_id")
    return record


async def get_file(state: ServerState, request: Request) -> Response:
    return JSONOut(_file(state, request))


async def file_content(state: ServerState, request: Request) -> Response:
    record = _file(state, request)
    store = service_of(state).store()
    assert store is not None
    return Response(store.file_bytes(record["id"]), media_type="application/octet-stream")


async def delete_file(state: ServerState, request: Request) -> Response:
    record = _file(state, request)
    store = service_of(state).store()
    assert store is not None
    store.delete_file(record["id"])
    return JSONOut({"id": record["id"], "object": "file", "deleted": True})
