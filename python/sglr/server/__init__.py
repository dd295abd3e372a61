"""HTTP server: SGLang-native and OpenAI-compatible routes over the engine.

Programmatic use: `build_app(engine, ServerSettings(...))` gives a Starlette app; the command
line is `sglr-server --model-path DIR` (or `python -m sglr ...`).

Layout: the route table (`routes.py`) over one package per API (`native/`, `openai/`; tool
calls in `tools/`), the generation every generating route shares (`generation.py`, answered by
`generation_response.py`), the app (`app.py`, `state.py`, `settings.py`, `metrics.py`) and the
command line (`launch.py`). The HTTP plumbing it shares with `sglr-router` is `sglr.http`.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: importing sglr.server must not import Starlette (or the engine) by itself.
    if name == "build_app":
        from sglr.server.app import build_app

        return build_app
    if name == "ServerSettings":
        from sglr.server.settings import ServerSettings

        return ServerSettings
    raise AttributeError(f"module 'sglr.server' has no attribute {name!r}")


__all__ = ["ServerSettings", "build_app"]
