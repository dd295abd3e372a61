"""The shape of sglr's Starlette apps (`sglr-server`'s, and `sglr-router`'s admin app): handlers
take the app's state, every exception a handler raises is answered as the JSON error
(`errors.as_api_error`), Starlette's own errors (404, 405) too, a bearer key when one is set
guards every route but the public ones, and every route has the body size limit."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sglr.http.auth import BearerAuthMiddleware
from sglr.http.body_limit import BodyLimitMiddleware
from sglr.http.errors import as_api_error, error_response, handle_http_exception, handle_unexpected

State = TypeVar("State")


def endpoint(
    state: State, handler: Callable[[State, Request], Awaitable[Response]]
) -> Callable[[Request], Awaitable[Response]]:
    """The handler with the app's state, and every exception mapped to a JSON error."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(state, request)
        except Exception as exc:
            error = as_api_error(exc)
            return error_response(error.status, error.message, error.param, error.code)

    return run


def json_app(
    routes: Sequence[Route], api_key: str | None, max_body_bytes: int, lifespan: Any = None
) -> Starlette:
    """An app whose every answer, errors included, is JSON in sglr's shape. The key is checked
    first: a client without it cannot make the app read anything."""
    middleware = []
    if api_key is not None:
        middleware.append(Middleware(BearerAuthMiddleware, api_key=api_key))
    middleware.append(Middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes))
    return Starlette(
        routes=list(routes),
        middleware=middleware,
        exception_handlers={HTTPException: handle_http_exception, Exception: handle_unexpected},
        lifespan=lifespan,
    )
