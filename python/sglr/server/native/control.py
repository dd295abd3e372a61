"""SGLang's native routes besides `/generate`: health, model and server info, cache flush,
abort, and the KV-join route that SGLang's `RuntimeEndpoint` still calls; and sglr's
`/debug/check_invariants`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from sglr.errors import EngineInternalError, SglrError
from sglr.http.errors import ApiError
from sglr.http.jsonout import JSONOut
from sglr.http.request import check_known_fields, get_bool, get_str, read_json_object
from sglr.server.state import ServerState

_FLUSHED = "Cache flushed.\n"
_FLUSH_POLL_S = 0.05


async def health(state: ServerState, request: Request) -> Response:
    """Liveness without generating (cheap enough for tight probe intervals)."""
    if state.shutting_down or not state.engine.is_alive:
        return PlainTextResponse("unavailable\n", status_code=503)
    return Response(status_code=200)


async def health_generate(state: ServerState, request: Request) -> Response:
    """Readiness: a one-token generation (an embedding server: a one-token embedding) must come
    back within `health_timeout_s`."""
    engine = state.engine
    if state.shutting_down or not engine.is_alive:
        return PlainTextResponse("unavailable\n", status_code=503)
    rid = f"health-{uuid.uuid4().hex}"
    try:
        probe = (
            engine.async_encode(input_ids=[0], rid=rid)
            if getattr(engine, "is_embedding", False)
            else engine.async_generate(
                input_ids=[0], sampling_params={"max_new_tokens": 1, "temperature": 0}, rid=rid
            )
        )
        result = await asyncio.wait_for(probe, timeout=state.settings.health_timeout_s)
    except Exception:  # a timeout or an engine that stopped: not healthy
        return PlainTextResponse("unavailable\n", status_code=503)
    if result["meta_info"]["finish_reason"].get("type") == "abort":
        return PlainTextResponse("unavailable\n", status_code=503)
    return Response(status_code=200)


def model_info_payload(state: ServerState) -> dict[str, Any]:
    engine = state.engine
    config = _model_config(engine.runner.model_dir)
    return {
        "model_path": engine.model_path,
        "tokenizer_path": engine.model_path,
        "served_model_name": engine.served_model_name,
        "is_generation": not getattr(engine, "is_embedding", False),
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": engine.config.load_format,
        "model_type": config.get("model_type"),
        "architectures": config.get("architectures"),
        "context_length": engine.context_len,
        "vocab_size": engine.runner.vocab_size,
        "has_image_understanding": engine.takes_images,
        "has_audio_understanding": False,
    }


def _model_config(model_dir: Any) -> dict[str, Any]:
    path = Path(str(model_dir)) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


async def model_info(state: ServerState, request: Request) -> Response:
    return JSONOut(model_info_payload(state))


async def server_info(state: ServerState, request: Request) -> Response:
    from sglr.version import __version__

    engine = state.engine
    settings = dataclasses.asdict(state.settings)
    settings.pop("launch_args")
    settings["api_key"] = None if state.settings.api_key is None else "<set>"
    launch_args = dict(state.settings.launch_args)
    if launch_args.get("api_key") is not None:
        launch_args["api_key"] = "<set>"
    stats = await asyncio.to_thread(engine.get_stats)
    return JSONOut(
        {
            **dataclasses.asdict(engine.config),
            **settings,
            "launch_args": launch_args,
            "model_path": engine.model_path,
            "served_model_name": engine.served_model_name,
            "context_length": engine.context_len,
            "max_total_num_tokens": engine.runner.num_kv_slots,
            "max_running_requests": engine.max_running_requests,
            "max_req_input_len": engine.context_len - 1,
            "device": str(engine.runner.device),
            "startup_time": state.started_at,
            "uptime_s": time.time() - state.started_at,
            "internal_states": [stats],
            "version": __version__,
        }
    )


async def flush_cache(state: ServerState, request: Request) -> Response:
    """Empties the prefix cache. Refused (400) while requests run; `?timeout=S` waits up to S
    seconds for the engine to become idle first."""
    raw_timeout = request.query_params.get("timeout", "0")
    try:
        timeout = float(raw_timeout)
    except ValueError:
        raise ApiError.bad_request(
            f"timeout must be a number of seconds, got {raw_timeout!r}", "timeout"
        ) from None
    if not 0 <= timeout <= 3600:
        raise ApiError.bad_request(f"timeout must be in [0, 3600] seconds, got {timeout}", "timeout")
    deadline = time.monotonic() + timeout
    while True:
        if await asyncio.to_thread(state.engine.flush_cache):
            return PlainTextResponse(_FLUSHED)
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(_FLUSH_POLL_S)
    raise ApiError.bad_request(
        "Cache not flushed: requests are running or waiting. Retry when the server is idle, "
        "or pass ?timeout=<seconds> to wait for it.",
    )


async def abort_request(state: ServerState, request: Request) -> Response:
    """`{"rid": "..."}` aborts one request, `{"abort_all": true}` every request of this server.
    Aborted requests end with finish_reason `abort` and keep what they generated."""
    body = await read_json_object(request, state.settings.max_body_bytes, allow_empty=True)
    check_known_fields(body, {"rid", "abort_all"}, "the /abort_request request")
    rid = get_str(body, "rid", "")
    abort_all = get_bool(body, "abort_all", False)
    if not rid and not abort_all:
        raise ApiError.bad_request("give a rid to abort, or abort_all: true", "rid")
    if abort_all:
        state.abort_all()
    else:
        state.engine.abort(rid)
    return Response(status_code=200)


async def concate_and_append_request(state: ServerState, request: Request) -> Response:
    """SGLang's `RuntimeEndpoint` calls this for `join(mode="concate_and_append")` after it has
    appended the children's text to the parent. sglr re-prefills the joined text on the parent's
    next request (mostly a prefix-cache hit), so there is nothing to do beyond checking the body."""
    body = await read_json_object(request, state.settings.max_body_bytes)
    check_known_fields(body, {"src_rids", "dst_rid"}, "the /concate_and_append_request request")
    src = body.get("src_rids")
    if not isinstance(src, list) or not all(isinstance(r, str) for r in src):
        raise ApiError.bad_request("src_rids must be an array of strings", "src_rids")
    if not isinstance(body.get("dst_rid"), str):
        raise ApiError.bad_request("dst_rid must be a string", "dst_rid")
    return Response(status_code=200)


async def check_invariants(state: ServerState, request: Request) -> Response:
    """The engine's KV and scheduler accounting checked now (`Engine.check_invariants`: slots,
    rows, the prefix tree, the owners of the request collections) and the stored responses'
    bound, with the engine's stats. For soak runs and operators; a violation is a 500 naming it."""
    engine = state.engine
    try:
        await asyncio.to_thread(engine.check_invariants)
        state.responses.check_invariants()
    except SglrError:
        raise
    except Exception as exc:  # a violated invariant is an engine bug: say which
        raise EngineInternalError(f"invariant violated: {type(exc).__name__}: {exc}") from exc
    stats = await asyncio.to_thread(engine.get_stats)
    return JSONOut({"ok": True, "stats": stats})


async def root(state: ServerState, request: Request) -> Response:
    return PlainTextResponse("sglr is running\n")
