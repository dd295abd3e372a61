"""Expression nodes of the language: what `s += ...` submits and what the tracer records.

Nodes are plain values. The interpreter (`stream_executor.py`) executes them one by one in a
stream; the tracer (`tracer.py`) records them into a graph (`graph.py`). `describe()` names a
node in error messages and in the graph printer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglr.errors import TraceError

# SGLang programs import the dtype regexes from the IR module; they are defined with the dtype rules.
from sglr.lang.dtype_constraints import REGEX_BOOL as REGEX_BOOL
from sglr.lang.dtype_constraints import REGEX_FLOAT as REGEX_FLOAT
from sglr.lang.dtype_constraints import REGEX_INT as REGEX_INT
from sglr.lang.dtype_constraints import REGEX_STR as REGEX_STR


class Expr:
    """Base of every node. `a + b` concatenates nodes (a `str` becomes `ConstantText`)."""

    kind = "expr"

    def __add__(self, other: Any) -> ExprList:
        return ExprList([self, as_expr(other)])

    def __radd__(self, other: Any) -> ExprList:
        return ExprList([as_expr(other), self])

    def describe(self) -> str:
        return self.kind

    def __repr__(self) -> str:
        return self.describe()


class ExprList(Expr):
    """A sequence of nodes executed in order; nested lists are flattened on construction."""

    kind = "expr_list"

    def __init__(self, exprs: Sequence[Any]) -> None:
        self.exprs: list[Expr] = []
        for expr in exprs:
            expr = as_expr(expr)
            if isinstance(expr, ExprList):
                self.exprs.extend(expr.exprs)
            else:
                self.exprs.append(expr)

    def describe(self) -> str:
        return " + ".join(expr.describe() for expr in self.exprs)


class ConstantText(Expr):
    kind = "text"

    def __init__(self, value: str) -> None:
        self.value = value

    def describe(self) -> str:
        shown = self.value if len(self.value) <= 40 else self.value[:37] + "..."
        return f"Text({shown!r})"


class Argument(Expr):
    """A placeholder for a function argument while tracing; filled in with its value at run time."""

    kind = "argument"

    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return f"Argument({self.name!r})"

    def _unavailable(self, what: str) -> TraceError:
        return TraceError(
            f"the program {what} argument {self.name!r} while tracing; a traced program may only "
            f"append arguments with `s += ...` or `+` (pass a value for {self.name!r} to trace it)"
        )

    def __format__(self, spec: str) -> str:
        raise self._unavailable("puts in an f-string or format() the")

    def __str__(self) -> str:
        raise self._unavailable("converts to str the")

    def __bool__(self) -> bool:
        raise self._unavailable("branches on the")

    def __iter__(self):
        raise self._unavailable("iterates over the")

    def __len__(self) -> int:
        raise self._unavailable("takes the length of the")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._unavailable(f"calls .{name} on the")


class Gen(Expr):
    """Generate text into variable `name`; `overrides` are the sampling values the user set."""

    kind = "gen"

    def __init__(self, name: str | None, overrides: dict[str, Any]) -> None:
        self.name = name
        self.overrides = overrides

    def describe(self) -> str:
        return f"Gen({self.name!r})"


class Select(Expr):
    """Choose one of `choices` by likelihood and store it in variable `name`."""

    kind = "select"

    def __init__(self, name: str | None, choices: Sequence[str], temperature: float, choices_method: Any):
        self.name = name
        self.choices = list(choices)
        self.temperature = temperature
        self.choices_method = choices_method

    def describe(self) -> str:
        return f"Select({self.name!r}, choices={self.choices!r})"


class Image(Expr):
    """An image (path, bytes or PIL image) attached to the prompt at this position."""

    kind = "image"

    def __init__(self, source: Any) -> None:
        self.source = source

    def describe(self) -> str:
        shown = self.source if isinstance(self.source, str) else type(self.source).__name__
        return f"Image({shown!r})"


class RoleBegin(Expr):
    kind = "role_begin"

    def __init__(self, role: str) -> None:
        self.role = role

    def describe(self) -> str:
        return f"RoleBegin({self.role!r})"


class RoleEnd(Expr):
    kind = "role_end"

    def __init__(self, role: str) -> None:
        self.role = role

    def describe(self) -> str:
        return f"RoleEnd({self.role!r})"


class VarScopeBegin(Expr):
    kind = "var_scope_begin"

    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return f"VarScopeBegin({self.name!r})"


class VarScopeEnd(Expr):
    kind = "var_scope_end"

    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return f"VarScopeEnd({self.name!r})"


class Variable(Expr):
    """The value of variable `name` produced by node `source_id` (a traced reference).

    Reading its value in Python (branching, formatting, comparing) is data-dependent control
    flow, which a trace cannot represent: those operations raise `TraceError`.
    """

    kind = "variable"

    def __init__(self, name: str, source_id: int | None) -> None:
        self.name = name
        self.source_id = source_id

    def describe(self) -> str:
        return f"Variable({self.name!r}, source=%{self.source_id})"

    def _unavailable(self, what: str) -> TraceError:
        return TraceError(
            f"the program {what} generated variable {self.name!r} in Python code "
            "(data-dependent control flow), which cannot be traced; run it with f.run() instead"
        )

    def __format__(self, spec: str) -> str:
        raise self._unavailable("formats the")

    def __str__(self) -> str:
        raise self._unavailable("converts to str the")

    def __bool__(self) -> bool:
        raise self._unavailable("branches on the")

    def __eq__(self, other: object) -> bool:
        raise self._unavailable("compares the")

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        raise self._unavailable("iterates over the")

    def __len__(self) -> int:
        raise self._unavailable("takes the length of the")

    def __getitem__(self, key: Any) -> Any:
        raise self._unavailable("indexes the")

    def __int__(self) -> int:
        raise self._unavailable("converts to int the")

    def __float__(self) -> float:
        raise self._unavailable("converts to float the")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._unavailable(f"calls .{name} on the")


class CommitLazy(Expr):
    """Send the text so far to the backend to be cached (the fork prefix hint)."""

    kind = "commit_lazy"


class ConcatenateAndAppend(Expr):
    """Append the text that forked states added since the fork (`join(mode="concate_and_append")`)."""

    kind = "concatenate_and_append"

    def __init__(self, states: Sequence[Any]) -> None:
        self.states = list(states)


class Fork(Expr):
    """Tracer only: the parent stream forks `size` child streams here."""

    kind = "fork"

    def __init__(self, size: int) -> None:
        self.size = size

    def describe(self) -> str:
        return f"Fork({self.size})"


class GetForkItem(Expr):
    """Tracer only: the first node of fork child `index`; copies the parent's state at the fork."""

    kind = "get_fork_item"

    def __init__(self, fork_id: int, index: int) -> None:
        self.fork_id = fork_id
        self.index = index

    def describe(self) -> str:
        return f"GetForkItem(%{self.fork_id}, {self.index})"


class Join(Expr):
    """Tracer only: gather the variables of child streams into the parent (as lists)."""

    kind = "join"

    def __init__(self, child_last_ids: Sequence[int], mode: str = "gather_variable") -> None:
        self.child_last_ids = list(child_last_ids)
        self.mode = mode

    def describe(self) -> str:
        children = ", ".join(f"%{node_id}" for node_id in self.child_last_ids)
        return f"Join([{children}], mode={self.mode!r})"


def as_expr(value: Any) -> Expr:
    """Wraps a `str` as `ConstantText` and a list/tuple as `ExprList`; rejects anything else."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return ConstantText(value)
    if isinstance(value, (list, tuple)):
        return ExprList(value)
    if value is None:
        raise ValueError("Tried to append None to state.")
    raise TypeError(
        f"cannot append a {type(value).__name__} to a program state; append str, sgl.gen(...), "
        "sgl.select(...), a role, an image, or a list of them (convert numbers with str())"
    )


def variable_names(expr: Expr) -> list[str]:
    """Names of the variables `expr` will set when executed (gen, select, var scopes)."""
    if isinstance(expr, ExprList):
        return [name for child in expr.exprs for name in variable_names(child)]
    if isinstance(expr, (Gen, Select)) and expr.name is not None:
        return [expr.name]
    if isinstance(expr, VarScopeEnd):
        return [expr.name]
    return []
