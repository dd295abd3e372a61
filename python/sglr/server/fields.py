"""Typed reads of request fields; every mistake is a 400 that names the field."""

from __future__ import annotations

import math
from typing import Any

from sglr.server.body import json_type
from sglr.server.errors import ApiError

_MISSING = object()


def _wrong(name: str, expected: str, value: Any) -> ApiError:
    return ApiError.bad_request(f"{name} must be {expected}, got {json_type(value)}", param=name)


def check_known_fields(body: dict[str, Any], known: set[str] | frozenset[str], where: str) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise ApiError.bad_request(f"unknown field `{unknown[0]}` in {where}", param=unknown[0])


def get_bool(body: dict[str, Any], name: str, default: bool | None) -> bool | None:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _wrong(name, "a boolean", value)
    return value


def get_int(
    body: dict[str, Any],
    name: str,
    default: int | None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(name, "an integer", value)
    _check_range(name, value, minimum, maximum)
    return value


def get_number(
    body: dict[str, Any],
    name: str,
    default: float | None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _wrong(name, "a finite number", value)
    _check_range(name, value, minimum, maximum)
    return float(value)


def _check_range(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise ApiError.bad_request(f"{name} must be in [{low}, {high}], got {value}", param=name)


def get_str(body: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _wrong(name, "a string", value)
    return value


def get_dict(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _wrong(name, "an object", value)
    return value


def get_stop(body: dict[str, Any], name: str = "stop") -> list[str] | None:
    """`stop`: a string or a list of strings (null or [] for none)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise _wrong(name, "a string or an array of strings", value)


def get_int_list(body: dict[str, Any], name: str) -> list[int] | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return list(value)
    raise _wrong(name, "an array of integers", value)


def require_null(body: dict[str, Any], name: str, reason: str) -> None:
    """A field sglr knows but does not support: accepted only when absent, null, false or empty."""
    value = body.get(name, _MISSING)
    if value is _MISSING or value is None or value is False or value in ("", [], {}):
        return
    raise ApiError.bad_request(f"{name} is not supported: {reason}", param=name)
