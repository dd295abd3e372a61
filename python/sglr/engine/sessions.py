"""`SessionRegistry`: the caller's side of SGLang's sessions (`open_session`, `session_params`).

A session remembers its requests as a tree: each request's prompt, its output (the assembler
the caller reads it from) and the request it continued. A request with `session_params`
continuing request `rid` gets that request's prompt + output (`drop_previous_output`: the prompt
alone; `offset`: cut to that many tokens) followed by its own tokens (less a leading BOS) as its
prompt, and becomes `rid`'s child; with no `rid` it starts from its own prompt. `replace` first
forgets `rid`'s children (all of the session's requests, with no `rid`), aborting those still
running. The continued request must have finished (its result read). The KV the session's
requests leave stays cached: the scheduler pins the last one (`scheduler/session_pins.py`), so a
continuation's shared prefix is a cache hit.

Bounds: `max_sessions` open at once, `max_session_requests` remembered per session, and each
request's prompt at most the session's `capacity_of_str_len` tokens (SGLang's name; sglr counts
tokens). Errors: `UnknownSessionError`, `SessionError`, `SessionLimitError` (all HTTP 400).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sglr.engine.assembler import OutputAssembler
from sglr.engine.session_params import SessionParams
from sglr.errors import InvalidRequestError, SessionError, SessionLimitError, UnknownSessionError
from sglr.limits import MAX_SESSION_REQUESTS, MAX_SESSIONS


@dataclass(eq=False)
class _Turn:
    prompt_ids: list[int]
    result: OutputAssembler
    max_new_tokens: int
    parent: str | None
    child_rids: list[str] = field(default_factory=list)


@dataclass(eq=False)
class _Session:
    capacity: int
    turns: dict[str, _Turn] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionPrompt:
    """A session request's whole prompt, and the request it continues (None: none)."""

    ids: list[int]
    session_id: str
    parent: str | None


class SessionRegistry:
    def __init__(
        self,
        abort: Callable[[str], None],
        max_sessions: int = MAX_SESSIONS,
        max_session_requests: int = MAX_SESSION_REQUESTS,
    ) -> None:
        """`abort(rid)`: ends a request still running that `replace` forgets."""
        self._abort = abort
        self.max_sessions = max_sessions
        self.max_session_requests = max_session_requests
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._sessions

    def open(self, capacity_of_str_len: int, session_id: str | None = None) -> str:
        if (
            isinstance(capacity_of_str_len, bool)
            or not isinstance(capacity_of_str_len, int)
            or capacity_of_str_len < 1
        ):
            raise InvalidRequestError(
                "capacity_of_str_len must be a positive integer", param="capacity_of_str_len"
            )
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise InvalidRequestError("session_id must be a non-empty string", param="session_id")
        session_id = session_id if session_id is not None else uuid.uuid4().hex
        with self._lock:
            if session_id in self._sessions:
                raise SessionError(f"session {session_id!r} is already open", param="session_id")
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitError(
                    f"{self.max_sessions} sessions are open: close one first",
                    param="session_id",
                    limit="max_sessions",
                )
            self._sessions[session_id] = _Session(capacity_of_str_len)
        return session_id

    def close(self, session_id: str) -> None:
        with self._lock:
            if self._sessions.pop(session_id, None) is None:
                raise UnknownSessionError(f"session {session_id!r} is not open", param="session_id")

    def compose(self, params: SessionParams, ids: list[int], bos_token_id: int | None) -> SessionPrompt:
        """The prompt of a request of session `params.id` whose own tokens are `ids`."""
        to_abort: list[str] = []
        with self._lock:
            session = self._get(params.id)
            if params.replace and params.rid is None:
                to_abort = [rid for rid, turn in session.turns.items() if not turn.result.finished]
                session.turns.clear()
            if params.rid is not None:
                turn = session.turns.get(params.rid)
                if turn is None or not turn.result.finished:
                    raise SessionError(
                        f"session_params.rid {params.rid!r} is not a finished request of session {params.id!r}",
                        param="session_params.rid",
                    )
                if params.replace:
                    for child in turn.child_rids:
                        to_abort += self._forget(session, child)
                    turn.child_rids = []
                base = list(turn.prompt_ids)
                if not params.drop_previous_output:
                    base += turn.result.output_ids[: turn.max_new_tokens]
                if params.offset:
                    base = base[: params.offset]
                if ids and bos_token_id is not None and ids[0] == bos_token_id:
                    ids = ids[1:]
                ids = base + ids
            if len(ids) > session.capacity:
                raise SessionLimitError(
                    f"the session request's prompt is {len(ids)} tokens, over its session's capacity_of_str_len "
                    f"of {session.capacity}",
                    param="session_params",
                    limit="capacity_of_str_len",
                )
        for rid in to_abort:
            self._abort(rid)
        return SessionPrompt(ids, params.id, params.rid)

    def record(self, prompt: SessionPrompt, rid: str, result: OutputAssembler, max_new_tokens: int) -> None:
        """Remembers request `rid` (about to be submitted) as a child of `prompt.parent`."""
        with self._lock:
            session = self._get(prompt.session_id)
            if rid in session.turns:
                raise SessionError(
                    f"session {prompt.session_id!r} has a request {rid!r} already", param="rid"
                )
            if len(session.turns) >= self.max_session_requests:
                raise SessionLimitError(
                    f"session {prompt.session_id!r} holds {self.max_session_requests} requests; "
                    "open a new one (or replace its history)",
                    param="session_params",
                    limit="max_session_requests",
                )
            session.turns[rid] = _Turn(prompt.ids, result, max_new_tokens, prompt.parent)
            parent = session.turns.get(prompt.parent) if prompt.parent is not None else None
            if parent is not None:
                parent.child_rids.append(rid)

    def _get(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSessionError(f"session {session_id!r} is not open", param="session_params.id")
        return session

    def _forget(self, session: _Session, rid: str) -> list[str]:
        """Drops `rid` and its descendants; returns those still running."""
        turn = session.turns.pop(rid, None)
        if turn is None:
            return []
        running = [] if turn.result.finished else [rid]
        for child in turn.child_rids:
            running += self._forget(session, child)
        return running

    def check_invariants(self) -> None:
        with self._lock:
            assert len(self._sessions) <= self.max_sessions, "more sessions open than allowed"
            for session_id, session in self._sessions.items():
                for rid, turn in session.turns.items():
                    assert turn.parent is None or turn.parent != rid, f"{session_id}: {rid} continues itself"
                    for child in turn.child_rids:
                        assert session.turns[child].parent == rid, f"{session_id}: {child} lost its parent"
