"""`SessionMixin`: `Engine`'s session methods (SGLang's `open_session` / `close_session`).

The caller's side keeps each session's requests (`sessions.py`: what a continuation's prompt
is); the scheduler keeps their KV pinned (`scheduler/session_pins.py`), in this process or in
the worker (messages `OpenSession` / `CloseSession`).
"""

from __future__ import annotations

from typing import Any

_SESSION_CALL_TIMEOUT_S = 60.0


class SessionMixin:
    _builder: Any  # RequestBuilder
    _scheduler: Any  # SchedulerHandle

    def open_session(self, capacity_of_str_len: int, session_id: str | None = None) -> str:
        """Opens a session and returns its id (`session_id`, or a new one). Its requests pass
        `session_params={"id": ..., "rid": ...}`; see docs/scheduling.md. Raises
        `SessionError` (id taken), `SessionLimitError` (`max_sessions` open)."""
        self._check_open()  # type: ignore[attr-defined]
        sessions = self._builder.sessions
        session_id = sessions.open(capacity_of_str_len, session_id)
        try:
            self._scheduler.open_session(session_id).result(timeout=_SESSION_CALL_TIMEOUT_S)
        except BaseException:
            sessions.close(session_id)
            raise
        return session_id

    def close_session(self, session_id: str) -> None:
        """Forgets the session; its KV stays cached but no longer pinned. Requests of it still
        running finish normally. Raises `UnknownSessionError` when it is not open."""
        self._builder.sessions.close(session_id)
        if self._scheduler.is_alive:
            self._scheduler.close_session(session_id).result(timeout=_SESSION_CALL_TIMEOUT_S)
