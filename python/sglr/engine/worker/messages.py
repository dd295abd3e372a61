"""Control messages between the front and worker rank 0: one dataclass per kind.

Front -> rank 0 (the commands socket), read in one place, `process._handle_command`:
`AddRequest`, `AbortRequest`, the queries `FlushCache`, `GetStats`, `GetTreeSummary`, `GetWaitingQueue`, `LoadLora`,
`UnloadLora`, `OpenSession`, `CloseSession`, `CheckInvariants` (each with a `token` its `Reply`
names) and `StopWorkers`.

Rank 0 -> front (the outputs socket), read in one place, `WorkerScheduler._handle`: `Ready`
(its runner's attributes), `Failed` (why it could not start or serve), `Outputs` (one step's
`TokenOutput`s, every step), `Heartbeat`, `Reply` and `Stopped`.

Pickled as their class and fields (`__reduce__`): `Outputs` leaves rank 0 every step, and the
default form (a dict of fields) costs more to build and to load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.engine.kv.tree_summary import TreeSummaryLimits
from sglr.engine.request import TokenizedRequest
from sglr.engine.token_output import TokenOutput
from sglr.engine.worker.runner_info import RunnerInfo


@dataclass(frozen=True, slots=True)
class _Message:
    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, name) for name in self.__match_args__))


# ----- front -> rank 0 -----


@dataclass(frozen=True, slots=True)
class AddRequest(_Message):
    request: TokenizedRequest


@dataclass(frozen=True, slots=True)
class AbortRequest(_Message):
    rid: str


@dataclass(frozen=True, slots=True)
class Query(_Message):
    """A command that wants a `Reply` with the same `token`."""

    token: int


@dataclass(frozen=True, slots=True)
class FlushCache(Query):
    pass


@dataclass(frozen=True, slots=True)
class GetStats(Query):
    pass


@dataclass(frozen=True, slots=True)
class GetTreeSummary(Query):
    limits: TreeSummaryLimits


@dataclass(frozen=True, slots=True)
class GetWaitingQueue(Query):
    limit: int


@dataclass(frozen=True, slots=True)
class LoadLora(Query):
    lora_id: int
    name: str
    path: str


@dataclass(frozen=True, slots=True)
class UnloadLora(Query):
    lora_id: int


@dataclass(frozen=True, slots=True)
class OpenSession(Query):
    session_id: str


@dataclass(frozen=True, slots=True)
class CloseSession(Query):
    session_id: str


@dataclass(frozen=True, slots=True)
class CheckInvariants(Query):
    pass


@dataclass(frozen=True, slots=True)
class StopWorkers(_Message):
    pass


Command = (
    AddRequest
    | AbortRequest
    | FlushCache
    | GetStats
    | GetTreeSummary
    | GetWaitingQueue
    | LoadLora
    | UnloadLora
    | OpenSession
    | CloseSession
    | CheckInvariants
    | StopWorkers
)


# ----- rank 0 -> front -----


@dataclass(frozen=True, slots=True)
class Ready(_Message):
    runner_info: RunnerInfo


@dataclass(frozen=True, slots=True)
class Failed(_Message):
    reason: str


@dataclass(frozen=True, slots=True)
class Outputs(_Message):
    outputs: list[TokenOutput]


@dataclass(frozen=True, slots=True)
class Heartbeat(_Message):
    """For the front's watchdog: is the loop stepping while it has work?"""

    num_steps: int
    has_work: bool


@dataclass(frozen=True, slots=True)
class Reply(_Message):
    """The answer to the `Query` with this `token`: its value, or the exception it raised."""

    token: int
    value: Any


@dataclass(frozen=True, slots=True)
class Stopped(_Message):
    """Rank 0 stopped as asked and exits next (not a failure)."""


WorkerMessage = Ready | Failed | Outputs | Heartbeat | Reply | Stopped
