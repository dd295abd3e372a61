"""Which backend a program runs on: the one passed, else the calling program's, else the default.

Whatever the user passes, callers get an object with the whole backend protocol: a `Runtime`
stands for its endpoint and an in-process `Engine` is wrapped in an `EngineBackend`.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

from sglr.lang.global_config import global_config

# The backend of the program whose body is running: nested program calls default to it.
_RUNNING_BACKEND: contextvars.ContextVar[Any] = contextvars.ContextVar("sglr_backend", default=None)


@contextlib.contextmanager
def running_on(backend: Any) -> Iterator[None]:
    """Inside the block, programs called without a backend run on `backend`."""
    token = _RUNNING_BACKEND.set(backend)
    try:
        yield
    finally:
        _RUNNING_BACKEND.reset(token)


def resolve_backend(backend: Any) -> Any:
    """The given backend, else the calling program's, else the default, as a backend object."""
    if backend is None:
        backend = _RUNNING_BACKEND.get()
    backend = backend if backend is not None else global_config.default_backend
    if backend is None:
        raise ValueError("Please specify a backend: pass backend=... or call sgl.set_default_backend(...)")
    return as_backend(backend)


def as_backend(backend: Any) -> Any:
    """A `Runtime` stands for its endpoint; an in-process `Engine` is wrapped in an `EngineBackend`."""
    return wrap_engine(getattr(backend, "endpoint", backend))


def wrap_engine(backend: Any) -> Any:
    """An `EngineBackend` over `backend` if it is an in-process `Engine`, else `backend` itself."""
    # NOTE: looked up in sys.modules, so that checking never imports the engine (and torch): an
    # Engine object exists only once its module has been imported.
    engine_module = sys.modules.get("sglr.engine.engine")
    if engine_module is not None and isinstance(backend, engine_module.Engine):
        # Imported here: the engine backend imports engine modules, which plain programs never need.
        from sglr.lang.backend.engine_backend import EngineBackend

        return EngineBackend(backend)
    return backend
