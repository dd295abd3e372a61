"""What a program's `s` offers for appending, shared by the running state (`ProgramState`) and its
tracing stand-in (`TracerState`), and the group of states `s.fork(n)` returns.

Roles and variable scopes are ordinary nodes appended in order, so a state only defines
`_append` (execute, or record) and `fork`; everything here is written once in their terms.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from sglr.lang import ir

S = TypeVar("S", bound="StateSurface")

JOIN_MODES = ("gather_variable", "concate_and_append")


def check_join_mode(mode: str) -> None:
    if mode not in JOIN_MODES:
        raise ValueError(f"Invalid join mode: {mode}")


class StateSurface:
    """The appending half of a program state (`s += ...`, roles, `var_scope`, `copy`)."""

    def _append(self, expr: Any) -> None:
        raise NotImplementedError

    def fork(self, size: int = 1, position_ids_offset: Any = None) -> ForkedStates:
        raise NotImplementedError

    def __iadd__(self: S, other: Any) -> S:
        self._append(other)
        return self

    def _role(self, role: str, expr: Any = None) -> Any:
        if expr is not None:
            self._append([ir.RoleBegin(role), expr, ir.RoleEnd(role)])
            return None
        return self._role_scope(role)

    @contextlib.contextmanager
    def _role_scope(self, role: str) -> Iterator[None]:
        self._append(ir.RoleBegin(role))
        yield
        self._append(ir.RoleEnd(role))

    def system(self, expr: Any = None) -> Any:
        """`s.system("...")` appends a system turn; `with s.system(): ...` wraps appends in one."""
        return self._role("system", expr)

    def user(self, expr: Any = None) -> Any:
        return self._role("user", expr)

    def assistant(self, expr: Any = None) -> Any:
        return self._role("assistant", expr)

    @contextlib.contextmanager
    def var_scope(self, name: str) -> Iterator[None]:
        """The text appended inside the block becomes variable `name`."""
        self._append(ir.VarScopeBegin(name))
        yield
        self._append(ir.VarScopeEnd(name))

    @contextlib.contextmanager
    def copy(self, position_ids_offset: Any = None) -> Iterator[Any]:
        """A fork of one state for the block, joined back at its end."""
        group = self.fork(1)
        yield group[0]
        group.join()


class ForkedStates(Generic[S]):
    """The states of `s.fork(n)`: index them, append to all, `join()` them back into `s`."""

    def __init__(self, states: list[S], src_state: S) -> None:
        self.states = states
        self.src_state = src_state

    def __getitem__(self, index: int) -> S:
        return self.states[index]

    def __setitem__(self, index: int, value: S) -> None:
        # `forks[i] += x` assigns the (same) state back.
        if value is not self.states[index]:
            raise ValueError("a fork's state can only be appended to, not replaced")

    def __len__(self) -> int:
        return len(self.states)

    def __iter__(self) -> Iterator[S]:
        return iter(self.states)

    def __iadd__(self, other: Any) -> ForkedStates[S]:
        if callable(other) and not isinstance(other, ir.Expr):
            for index, state in enumerate(self.states):
                state += other(index)
        elif isinstance(other, ir.Expr):
            for state in self.states:
                state += other
        elif isinstance(other, (list, tuple)):
            if len(other) != len(self.states):
                raise ValueError(f"got {len(other)} values for {len(self.states)} forks")
            for state, value in zip(self.states, other, strict=True):
                state += value
        else:
            raise ValueError(f"Invalid value: {other!r} (append a callable i -> expr, an expr, or a list)")
        return self

    def join(self, mode: str = "gather_variable") -> None:
        raise NotImplementedError
