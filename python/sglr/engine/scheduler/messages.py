"""What reaches the scheduler loop through its inbox: one dataclass per kind of message.

Callers on any thread put them (`SchedulerLoop.submit`, `abort`, `call`, `stop`; the compile
pool puts `ConstraintReady`); the loop thread reads them between steps, all in one place
(`SchedulerLoop._handle`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from sglr.engine.request import Req
from sglr.errors import InvalidRequestError


@dataclass(frozen=True, slots=True)
class AddRequest:
    """A new request (its constraint, if any, already compiling)."""

    req: Req


@dataclass(frozen=True, slots=True)
class ConstraintReady:
    """The request's constraint compiled (`error` None) or did not."""

    req: Req
    error: InvalidRequestError | None


@dataclass(frozen=True, slots=True)
class AbortRequest:
    rid: str


@dataclass(frozen=True, slots=True)
class CallOnLoop:
    """Run `fn` on the loop thread between steps; its result or error goes to `future`."""

    fn: Callable[[], Any]
    future: Future[Any]


@dataclass(frozen=True, slots=True)
class StopLoop:
    pass


InboxMessage = AddRequest | ConstraintReady | AbortRequest | CallOnLoop | StopLoop
