"""`build_app(engine)`: the Starlette application (all state lives in the returned app).

Routes: SGLang's native API (`/generate`, `/model_info`, `/server_info`, `/health`,
`/health_generate`, `/flush_cache`, `/abort_request`, `/load_lora_adapter`,
`/unload_lora_adapter`, `/tokenize`, `/detokenize`, ...), the OpenAI-compatible API
(`/v1/models`, `/v1/completions`, `/v1/chat/completions`), and `/metrics` when enabled.
Every error is JSON in one shape (`sglr.http.errors`); nothing a client sends yields a 500
or a stack trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sglr.http.app import endpoint, json_app
from sglr.server.openai.batches.build import build_batch_service
from sglr.server.routes import NATIVE_ROUTES, OPENAI_ROUTES, RouteSpec
from sglr.server.settings import ServerSettings
from sglr.server.state import ServerState

if TYPE_CHECKING:
    from sglr.engine.engine import Engine


def _routes(state: ServerState) -> list[Route]:
    table: list[RouteSpec] = [*NATIVE_ROUTES, *OPENAI_ROUTES]
    if state.metrics is not None:
        table.append(RouteSpec("/metrics", _metrics, ("GET",)))
    return [Route(spec.path, endpoint(state, spec.handler), methods=list(spec.methods)) for spec in table]


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
    batches = state.batches = build_batch_service(state)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await batches.start()  # resumes the batches a previous server left unfinished
        yield
        state.shutting_down = True  # health checks fail while connections drain
        await batches.stop()

    app = json_app(_routes(state), settings.api_key, settings.max_body_bytes, lifespan)
    app.state.sglr = state
    return app
