"""Reading request bodies: a size limit, strict JSON, a JSON object at the top."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from sglr.server.errors import ApiError


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body; 413 as soon as it is known to be over `max_bytes` (before reading it all
    when the client announces its length)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            too_big = int(declared) > max_bytes
        except ValueError:
            raise ApiError.bad_request("invalid Content-Length header") from None
        if too_big:
            raise ApiError(413, f"request body is larger than the server's limit of {max_bytes} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, f"request body is larger than the server's limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json_object(request: Request, max_bytes: int, allow_empty: bool = False) -> dict[str, Any]:
    """The body as a JSON object. NaN / Infinity are refused (they are not JSON), and so is
    anything but an object at the top level. `allow_empty`: an empty body reads as `{}`."""
    raw = await read_body(request, max_bytes)
    if not raw.strip():
        if allow_empty:
            return {}
        raise ApiError.bad_request("the request body is empty; expected a JSON object")
    try:
        text = raw.decode("utf-8")  # JSON over HTTP is UTF-8 (json.loads would guess UTF-16/32)
    except UnicodeDecodeError:
        raise ApiError.bad_request("the request body is not valid UTF-8") from None
    try:
        body = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ApiError.bad_request("the request body is nested too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise ApiError.bad_request(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError.bad_request(f"the request body must be a JSON object, got {json_type(body)}")
    return body


def json_type(value: Any) -> str:
    """How a JSON value's type reads in an error message ("a string", "an array", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
