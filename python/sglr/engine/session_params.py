"""`SessionParams`: SGLang's `session_params` of a generate request, checked field by field.

`id`: the open session the request belongs to; `rid`: the request of that session it continues
(None: it starts from its own prompt); `offset`: keep only that many tokens of what it continues
(None or 0: all of them); `replace`: the continued request's later branches are forgotten (and
the continued request aborted if it still runs; with no `rid`, the whole session's history);
`drop_previous_output`: continue from the previous request's prompt alone, without its output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import InvalidRequestError

_FIELDS = frozenset({"id", "rid", "offset", "replace", "drop_previous_output"})


@dataclass(frozen=True)
class SessionParams:
    id: str
    rid: str | None = None
    offset: int | None = None
    replace: bool = False
    drop_previous_output: bool = False


def parse_session_params(value: Any) -> SessionParams | None:
    """`value` as the request gave it (a dict or a `SessionParams`; None: no session)."""
    if value is None or isinstance(value, SessionParams):
        return value
    if not isinstance(value, dict):
        raise InvalidRequestError("session_params must be an object", param="session_params")
    unknown = sorted(set(value) - _FIELDS)
    if unknown:
        raise InvalidRequestError(
            f"session_params has unknown field(s) {', '.join(map(repr, unknown))}", param="session_params"
        )
    session_id, rid, offset = value.get("id"), value.get("rid"), value.get("offset")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidRequestError("session_params.id must be a session id", param="session_params.id")
    if rid is not None and not isinstance(rid, str):
        raise InvalidRequestError(
            "session_params.rid must be a request id or null", param="session_params.rid"
        )
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset < 0):
        raise InvalidRequestError(
            "session_params.offset must be a non-negative integer", param="session_params.offset"
        )
    flags = {}
    for name in ("replace", "drop_previous_output"):
        flag = value.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise InvalidRequestError(
                f"session_params.{name} must be a boolean", param=f"session_params.{name}"
            )
        flags[name] = bool(flag)
    return SessionParams(session_id, rid, offset, **flags)
