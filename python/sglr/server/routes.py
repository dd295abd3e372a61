"""The route tables: SGLang's native API (`native/`) and the OpenAI-compatible API (`openai/`).

A route is a `RouteSpec` here and a handler `async (state, request) -> Response` in its API's
package; `app.py` binds each handler to the app's state and maps what it raises to JSON errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from sglr.server.dashboard.routes import dashboard_data, dashboard_page, dashboard_script
from sglr.server.native.control import (
    abort_request,
    check_invariants,
    concate_and_append_request,
    flush_cache,
    health,
    health_generate,
    model_info,
    root,
    server_info,
)
from sglr.server.native.encode import encode
from sglr.server.native.generate import generate
from sglr.server.native.lora import load_lora_adapter, unload_lora_adapter
from sglr.server.native.sessions import close_session, open_session
from sglr.server.native.tokenize import detokenize, tokenize
from sglr.server.openai.batches.batches_api import cancel_batch, create_batch, get_batch, list_batches
from sglr.server.openai.batches.files_api import create_file, delete_file, file_content, get_file, list_files
from sglr.server.openai.chat import chat_completions
from sglr.server.openai.completions import completions
from sglr.server.openai.embeddings import embeddings
from sglr.server.openai.models import get_model, list_models
from sglr.server.openai.responses.routes import (
    cancel_response,
    create_response,
    delete_response,
    get_response,
    list_input_items,
)
from sglr.server.state import ServerState

Handler = Callable[[ServerState, Request], Awaitable[Response]]


class RouteSpec(NamedTuple):
    path: str
    handler: Handler
    methods: tuple[str, ...]


_GET = ("GET",)
_POST = ("POST",)

NATIVE_ROUTES = (
    RouteSpec("/generate", generate, ("POST", "PUT")),
    RouteSpec("/encode", encode, ("POST", "PUT")),
    RouteSpec("/health", health, _GET),
    RouteSpec("/health_generate", health_generate, _GET),
    RouteSpec("/model_info", model_info, _GET),
    RouteSpec("/get_model_info", model_info, _GET),  # SGLang's older names
    RouteSpec("/server_info", server_info, _GET),
    RouteSpec("/get_server_info", server_info, _GET),
    RouteSpec("/flush_cache", flush_cache, ("GET", "POST")),
    RouteSpec("/abort_request", abort_request, _POST),
    RouteSpec("/concate_and_append_request", concate_and_append_request, _POST),
    RouteSpec("/load_lora_adapter", load_lora_adapter, _POST),
    RouteSpec("/unload_lora_adapter", unload_lora_adapter, _POST),
    RouteSpec("/open_session", open_session, _POST),
    RouteSpec("/close_session", close_session, _POST),
    RouteSpec("/tokenize", tokenize, _POST),
    RouteSpec("/v1/tokenize", tokenize, _POST),  # SGLang serves both spellings
    RouteSpec("/detokenize", detokenize, _POST),
    RouteSpec("/v1/detokenize", detokenize, _POST),
    RouteSpec("/debug/check_invariants", check_invariants, _GET),
    RouteSpec("/dashboard", dashboard_page, _GET),  # server/dashboard/: the page, its script, its data
    RouteSpec("/dashboard/dashboard.js", dashboard_script, _GET),
    RouteSpec("/dashboard/data", dashboard_data, _GET),
    RouteSpec("/", root, _GET),
)

OPENAI_ROUTES = (
    RouteSpec("/v1/models", list_models, _GET),
    RouteSpec("/v1/models/{model:path}", get_model, _GET),
    RouteSpec("/v1/completions", completions, _POST),
    RouteSpec("/v1/chat/completions", chat_completions, _POST),
    RouteSpec("/v1/embeddings", embeddings, _POST),
    RouteSpec("/v1/responses", create_response, _POST),
    RouteSpec("/v1/responses/{response_id}", get_response, _GET),
    RouteSpec("/v1/responses/{response_id}", delete_response, ("DELETE",)),
    RouteSpec("/v1/responses/{response_id}/input_items", list_input_items, _GET),
    RouteSpec("/v1/responses/{response_id}/cancel", cancel_response, _POST),
    RouteSpec("/v1/files", create_file, _POST),
    RouteSpec("/v1/files", list_files, _GET),
    RouteSpec("/v1/files/{file_id}", get_file, _GET),
    RouteSpec("/v1/files/{file_id}", delete_file, ("DELETE",)),
    RouteSpec("/v1/files/{file_id}/content", file_content, _GET),
    RouteSpec("/v1/batches", create_batch, _POST),
    RouteSpec("/v1/batches", list_batches, _GET),
    RouteSpec("/v1/batches/{batch_id}", get_batch, _GET),
    RouteSpec("/v1/batches/{batch_id}/cancel", cancel_batch, _POST),
)
