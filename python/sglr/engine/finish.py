"""Why a request ended: exactly one typed finish reason per request.

    FinishStop(matched)    a stop token id or stop string was produced (or the constraint ended)
    FinishLength(length)   max_new_tokens (or the context) was reached
    FinishAbort(error)     the request ended early; `error` is an `sglr.errors` instance:
                           `RequestAbortedError` (the caller aborted it), `InvalidRequestError`
                           (e.g. a constraint that does not compile, with the `param` it names),
                           `EngineClosedError`, `EngineInternalError`

Each is also the dict SGLang's API reports in `meta_info["finish_reason"]` (`{"type": "stop",
"matched": ...}`, `{"type": "length", "length": ...}`, `{"type": "abort", "message": ...,
"err_type": ...}`), so
results stay plain JSON for callers, while code that needs the type reads the attributes. HTTP
statuses are not the engine's business: `sglr.server` maps `FinishAbort.error` to them.
"""

from __future__ import annotations

from typing import Any

from sglr.errors import (
    EngineClosedError,
    InvalidRequestError,
    RequestAbortedError,
    SglrError,
)


class FinishReason(dict):  # type: ignore[type-arg]
    """Base of the three finish reasons (a read-only view of SGLang's dict form)."""

    kind: str = ""

    def _blocked(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("finish reasons are immutable")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _blocked  # type: ignore[assignment]

    @property
    def is_abort(self) -> bool:
        return False

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from the constructor (dict subclasses would otherwise be refilled item by item).
        return (type(self), self._args())

    def _args(self) -> tuple[Any, ...]:
        raise NotImplementedError


class FinishStop(FinishReason):
    kind = "stop"

    def __init__(self, matched: int | str | None) -> None:
        super().__init__(type="stop", matched=matched)
        self.matched = matched

    def _args(self) -> tuple[Any, ...]:
        return (self.matched,)


class FinishLength(FinishReason):
    kind = "length"

    def __init__(self, length: int) -> None:
        super().__init__(type="length", length=length)
        self.length = length

    def _args(self) -> tuple[Any, ...]:
        return (self.length,)


class FinishAbort(FinishReason):
    kind = "abort"

    def __init__(self, error: SglrError) -> None:
        super().__init__(type="abort", message=str(error), err_type=_err_type(error))
        self.error = error

    @property
    def is_abort(self) -> bool:
        return True

    @property
    def by_caller(self) -> bool:
        """Aborted on purpose by the caller (`abort(rid)`, a client that went away), not failed."""
        return isinstance(self.error, RequestAbortedError)

    def _args(self) -> tuple[Any, ...]:
        return (self.error,)


# SGLang's `err_type` of an abort: what kind of failure, for clients that branch on it.
_ERR_TYPES: tuple[tuple[type[SglrError], str], ...] = (
    (RequestAbortedError, "abort"),
    (InvalidRequestError, "invalid_request"),
    (EngineClosedError, "engine_unavailable"),
)


def _err_type(error: SglrError) -> str:
    return next((name for kind, name in _ERR_TYPES if isinstance(error, kind)), "internal")
