"""Reading a request: the body (a size limit, strict JSON, a JSON object at the top) and typed
reads of its fields. Every mistake is an `ApiError` (400) that names the field when there is
one, or a `BodyTooLargeError` (413) for a body over the limit."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from sglr.http.body_limit import body_too_large, check_declared_length
from sglr.http.errors import ApiError

JSONObject = dict[str, Any]
Bound = float | None  # an inclusive range limit; None: unbounded

_MISSING = object()
_WRONG_TYPE = object()  # what a converter below returns for a value of the wrong JSON type


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body; 413 as soon as it is known to be over `max_bytes` (before reading it all
    when the client announces its length)."""
    check_declared_length(request.headers.get("content-length"), max_bytes)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise body_too_large(max_bytes)
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


def _wrong(name: str, expected: str, value: Any) -> ApiError:
    return ApiError.bad_request(f"{name} must be {expected}, got {json_type(value)}", param=name)


def check_known_fields(body: JSONObject, known: set[str] | frozenset[str], where: str) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise ApiError.bad_request(f"unknown field `{unknown[0]}` in {where}", param=unknown[0])


def _read(
    body: JSONObject, name: str, expected: str, convert: Callable[[Any], Any], scope: str | None = None
) -> Any:
    """`body[name]` through `convert` (None when absent or null); 400 for the wrong type."""
    value = body.get(name)
    if value is None:
        return None
    converted = convert(value)
    if converted is _WRONG_TYPE:
        raise _wrong(name if scope is None else f"{scope}.{name}", expected, value)
    return converted


def _bool(value: Any) -> Any:
    return value if isinstance(value, bool) else _WRONG_TYPE


def _int(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else _WRONG_TYPE


def _finite_number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _WRONG_TYPE
    # An int is finite however large (math.isfinite would convert it to a float and overflow).
    return value if isinstance(value, int) or math.isfinite(value) else _WRONG_TYPE


def _str(value: Any) -> Any:
    return value if isinstance(value, str) else _WRONG_TYPE


def _object(value: Any) -> Any:
    return value if isinstance(value, dict) else _WRONG_TYPE


def _stop_list(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    return _WRONG_TYPE


def _int_list(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return list(value)
    return _WRONG_TYPE


def get_bool(body: JSONObject, name: str, default: bool | None, scope: str | None = None) -> bool | None:
    """`scope`: the object `body` is a field of (`stream_options`), which errors name too."""
    value = _read(body, name, "a boolean", _bool, scope)
    return default if value is None else value


def get_int(
    body: JSONObject, name: str, default: int | None, minimum: Bound = None, maximum: Bound = None
) -> int | None:
    value = _read_in_range(body, name, "an integer", _int, minimum, maximum)
    return default if value is None else value


def get_number(
    body: JSONObject, name: str, default: float | None, minimum: Bound = None, maximum: Bound = None
) -> float | None:
    # Range-checked before float(): messages show the number as it was sent.
    value = _read_in_range(body, name, "a finite number", _finite_number, minimum, maximum)
    if value is None:
        return default
    try:
        return float(value)
    except OverflowError:  # an integer past every float, in a field without bounds
        raise ApiError.bad_request(f"{name} must be a finite number, got {value:.3e}", param=name) from None


def _read_in_range(
    body: JSONObject, name: str, expected: str, convert: Callable[[Any], Any], minimum: Bound, maximum: Bound
) -> Any:
    value = _read(body, name, expected, convert)
    if value is not None:
        _check_range(name, value, minimum, maximum)
    return value


def _check_range(name: str, value: float, minimum: Bound, maximum: Bound) -> None:
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise ApiError.bad_request(f"{name} must be in [{low}, {high}], got {value}", param=name)


def get_str(body: JSONObject, name: str, default: str | None = None) -> str | None:
    value = _read(body, name, "a string", _str)
    return default if value is None else value


def get_dict(body: JSONObject, name: str) -> dict[str, Any] | None:
    return _read(body, name, "an object", _object)


def get_stop(body: JSONObject, name: str = "stop") -> list[str] | None:
    """`stop`: a string or a list of strings (null or [] for none)."""
    return _read(body, name, "a string or an array of strings", _stop_list)


def get_int_list(body: JSONObject, name: str) -> list[int] | None:
    return _read(body, name, "an array of integers", _int_list)


def require_null(body: JSONObject, name: str, reason: str) -> None:
    """A field sglr knows but does not support: accepted only when absent, null, false or empty."""
    value = body.get(name, _MISSING)
    if value is _MISSING or value is None or value is False or value in ("", [], {}):
        return
    raise ApiError.bad_request(f"{name} is not supported: {reason}", param=name)
