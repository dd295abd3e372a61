"""Error responses: one JSON shape for every route of `sglr-server` and `sglr-router`, never a
stack trace, and the one place where sglr's typed errors become HTTP statuses (`as_api_error`).

    {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": 400}}

This is OpenAI's error object (the `openai` client reads `message`, `type`, `param`, `code`);
SGLang's native clients read `error.message`. `code` is the HTTP status, except where OpenAI
(and SGLang after it) names the error: an unknown `model` is 404 with code `model_not_found`.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from sglr.errors import (
    BodyTooLargeError,
    DuplicateWorkerError,
    EngineClosedError,
    EngineInternalError,
    HeadersTooLargeError,
    InvalidRequestError,
    LoraCapacityError,
    LoraNotFoundError,
    UnknownModelError,
    UnknownWorkerError,
)
from sglr.http.jsonout import JSONOut

logger = logging.getLogger("sglr.server")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",  # the server's state refuses it now (no room for another adapter)
    413: "invalid_request_error",
    415: "invalid_request_error",
    431: "invalid_request_error",
    500: "internal_server_error",
    502: "bad_gateway",  # sglr-router: the worker behind it failed
    503: "service_unavailable",
}


class ApiError(Exception):
    """Raised by handlers; answered with `status` and the error body above."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        """`code`: OpenAI's name of the error, where it has one (else the status is the code)."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @classmethod
    def bad_request(cls, message: str, param: str | None = None) -> ApiError:
        return cls(400, message, param)


# OpenAI's named codes and the error type it gives each.
_NAMED_CODE_TYPES = {"model_not_found": "invalid_request_error"}


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "internal_server_error")
    return {
        "error": {
            "message": message,
            "type": _NAMED_CODE_TYPES.get(code, kind),
            "param": param,
            "code": status if code is None else code,
        }
    }


def error_response(status: int, message: str, param: str | None = None, code: str | None = None) -> Response:
    return JSONOut(error_body(status, message, param, code), status_code=status)


class FieldNames(Protocol):
    """How a request spelled the field the engine names in an error (`sglr.server.param_names`)."""

    def client_name(self, engine_param: str | None) -> str | None: ...


def as_api_error(exc: BaseException, names: FieldNames | None = None) -> ApiError:
    """Maps an exception to what the client is told; `names` turns the engine's name of a bad
    field into the request's (None: the request used the engine's names)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BodyTooLargeError):
        return ApiError(413, exc.message, exc.param)
    if isinstance(exc, HeadersTooLargeError):
        return ApiError(431, exc.message, exc.param)
    if isinstance(exc, UnknownModelError):
        return ApiError(404, exc.message, exc.param, code="model_not_found")
    if isinstance(exc, LoraNotFoundError):  # an unload of an adapter that is not loaded
        return ApiError(404, exc.message, exc.param)
    if isinstance(exc, InvalidRequestError):
        param = exc.param if names is None else names.client_name(exc.param)
        message = exc.message
        if exc.param and param and param != exc.param:  # the message names the field as sent
            message = message.replace(exc.param, param)
        return ApiError(400, message, param)
    if isinstance(exc, EngineClosedError):
        return ApiError(503, "the engine is not running")
    if isinstance(exc, EngineInternalError):
        return ApiError(500, str(exc))
    if isinstance(exc, LoraCapacityError):  # retry after unloading one: a conflict, not overload
        return ApiError(409, str(exc))
    if isinstance(exc, UnknownWorkerError):  # sglr-router's admin routes name workers by url
        return ApiError(404, str(exc), "url")
    if isinstance(exc, DuplicateWorkerError):
        return ApiError(400, str(exc), "url")
    if isinstance(exc, ValueError):  # every sglr user mistake is a ValueError
        return ApiError(400, str(exc))
    logger.exception("unexpected error while serving a request", exc_info=exc)
    return ApiError(500, "internal server error (see the server log)")


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route: 404, wrong method: 405), in the JSON shape."""
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", None) or "error"
    return error_response(status, str(detail))


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    """Last resort for a failure outside the route handlers (which map their own errors)."""
    logger.error("unexpected error outside a route handler: %r", exc)
    return error_response(500, "internal server error (see the server log)")
