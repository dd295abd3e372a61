"""SGLang's LoRA admin routes: `POST /load_lora_adapter` `{"lora_name", "lora_path"}` and
`POST /unload_lora_adapter` `{"lora_name"}`, while requests run.

A load reads the adapter directory the request names, so that path goes through
`sglr.confined_paths` first: it must lie inside a directory of `--allowed-lora-path` (none given:
every runtime load is refused), symlinks followed, entries included; anything else is a
`PathNotAllowedError` before anything is read. Requests may name the adapter once the load has
answered. An unload refuses new requests for the adapter at once; the requests already using it
finish with it (the engine frees its weights after the last). Both answer SGLang's shape,
`{"success": true, "error_message": "", "loaded_adapters": {name: path}}`; errors are sglr's
error object (400 for a bad adapter or a name already loaded, 404 for an unload of an adapter
that is not loaded, 409 past `--max-loaded-loras`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.confined_paths import confine_directory
from sglr.errors import InvalidRequestError, PathNotAllowedError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_bool, get_str, read_json_object
from sglr.server.state import ServerState


async def load_lora_adapter(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    # `pinned` (SGLang: never evicted) is accepted: adapters here stay loaded until unloaded.
    check_known_fields(body, {"lora_name", "lora_path", "pinned"}, "the /load_lora_adapter request")
    name = _required_str(body, "lora_name")
    path = _required_str(body, "lora_path")
    get_bool(body, "pinned", False)
    await asyncio.to_thread(_load, state, name, path)
    return JSONOut(adapters_payload(state))


def _load(state: ServerState, name: str, path: str) -> None:
    """Confines the path (file system calls: off the event loop), then loads what it names."""
    if not state.lora_roots:
        raise PathNotAllowedError(
            "lora_path: this server loads no adapters at run time (start it with "
            "--allowed-lora-path DIR to load adapters from directories inside DIR)",
            "lora_path",
        )
    real = confine_directory(path, "lora_path", state.lora_roots)
    state.engine.load_lora_adapter(name, str(real))


async def unload_lora_adapter(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, {"lora_name"}, "the /unload_lora_adapter request")
    name = _required_str(body, "lora_name")
    await asyncio.to_thread(state.engine.unload_lora_adapter, name)
    return JSONOut(adapters_payload(state))


def adapters_payload(state: ServerState) -> dict[str, Any]:
    loaded = {ref.name: ref.path for ref in state.lora_adapters()}
    return {"success": True, "error_message": "", "loaded_adapters": loaded}


def _required_str(body: dict[str, Any], name: str) -> str:
    value = get_str(body, name)
    if not value:
        raise InvalidRequestError(f"{name} is required (a non-empty string)", name)
    return value
