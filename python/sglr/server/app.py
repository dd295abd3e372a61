"""`build_app(engine)`: the Starlette application (all state lives in the returned app).

Routes: SGLang's native API (`/generate`, `/model_info`, `/server_info`, `/health`,
`/health_generate`, `/flush_cache`, `/abort_request`, ...), the OpenAI-compatible API
(`/v1/models`, `/v1/completions`, `/v1/chat/completions`), and `/metrics` when enabled.
Every error is JSON in one shape (`sglr.server.errors`); nothing a client sends yields a 500
or a stack trace.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sglr.server.auth import BearerAuthMiddleware
from sglr.server.errors import as_api_error, error_response, handle_http_exception, handle_unexpected
from sglr.server.routes import NATIVE_ROUTES, OPENAI_ROUTES, Handler, RouteSpec
from sglr.server.settings import ServerSettings
from sglr.server.state import ServerState

if TYPE_CHECKING:
    from sglr.engine.engine import Engine


def _bind(state: ServerState, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The handler with the app's state, and every exception mapped to a JSON error."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(state, request)
        except Exception as exc:
            error = as_api_error(exc)
            return error_response(error.status, error.message, error.param)

    return endpoint


def _routes(state: ServerState) -> list[Route]:
    table: list[RouteSpec] = [*NATIVE_ROUTES, *OPENAI_ROUTES]
    if state.metrics is not None:
        table.append(RouteSpec("/metrics", _metrics, ("GET",)))
    return [Route(spec.path, _bind(state, spec.handler), methods=list(spec.methods)) for spec in table]


async def _metrics(state: ServerState, request: Request) -> Response:
    assert state.metrics is not None
    body, content_type = state.metrics.render()
    return Response(body, media_type=content_type)


def build_app(engine: Engine, settings: ServerSettings | None = None) -> Starlette:
    """An app serving `engine`. The caller owns the engine (and shuts it down after the app)."""
    settings = settings or ServerSettings()
    metrics = None
    if settings.enable_metrics:
        from sglr.server.metrics import ServerMetrics

        metrics = ServerMetrics(engine, engine.served_model_name)
    state = ServerState(engine=engine, settings=settings, metrics=metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        state.shutting_down = True  # health checks fail while connections drain

    middleware = []
    if settings.api_key is not None:
        middleware.append(Middleware(BearerAuthMiddleware, api_key=settings.api_key))
    app = Starlette(
        routes=_routes(state),
        middleware=middleware,
        exception_handlers={HTTPException: handle_http_exception, Exception: handle_unexpected},
        lifespan=lifespan,
    )
    app.state.sglr = state
    return app
