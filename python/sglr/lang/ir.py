"""Expression nodes of the language: what `s += ...` submits and what the tracer records.

Nodes are plain values. The interpreter (`stream_executor.py`) executes them one by one in a
stream; the tracer (`tracer.py`) records them into a graph (`graph.py`). `describe()` names a
node in error messages and in the graph printer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sglr.errors import TraceError

# SGLang programs import the dtype regexes from the IR module; they are defined with the dtype rules.
from sglr.lang.dtype_constraints import REGEX_BOOL as REGEX_BOOL
from sglr.lang.dtype_constraints import REGEX_FLOAT as REGEX_FLOAT
from sglr.lang.dtype_constraints import REGEX_INT as REGEX_INT
from sglr.lang.dtype_constraints import REGEX_STR as REGEX_STR

E = TypeVar("E", bound=type)


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


def _node(cls: type[E]) -> type[E]:
    """Declares a node class by its fields. Nodes compare by identity (a graph may hold equal
    nodes at different places) and print as `describe()`."""
    return dataclass(eq=False, repr=False)(cls)


@_node
class ConstantText(Expr):
    kind = "text"
    value: str

    def describe(self) -> str:
        shown = self.value if len(self.value) <= 40 else self.value[:37] + "..."
        return f"Text({shown!r})"


class _TraceOpaque:
    """A traced stand-in for a value that does not exist yet: reading it in Python code raises a
    `TraceError` that says what the program did. Subclasses word the error (`_unavailable`)."""

    _format_action = "formats the"

    def _unavailable(self, what: str) -> TraceError:
        raise NotImplementedError

    def __format__(self, spec: str) -> str:
        raise self._unavailable(self._format_action)

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


@_node
class _Named(Expr):
    """A node that carries one name (of an argument or a variable scope)."""

    name: str

    def describe(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Argument(_TraceOpaque, _Named):
    """A placeholder for a function argument while tracing; filled in with its value at run time."""

    kind = "argument"
    _format_action = "puts in an f-string or format() the"

    def _unavailable(self, what: str) -> TraceError:
        return TraceError(
            f"the program {what} argument {self.name!r} while tracing; a traced program may only "
            f"append arguments with `s += ...` or `+` (pass a value for {self.name!r} to trace it)"
        )


@_node
class Gen(Expr):
    """Generate text into variable `name`; `overrides` are the sampling values the user set."""

    kind = "gen"
    name: str | None
    overrides: dict[str, Any]

    def describe(self) -> str:
        return f"Gen({self.name!r})"


@_node
class Select(Expr):
    """Choose one of `choices` by likelihood and store it in variable `name`."""

    kind = "select"
    name: str | None
    choices: list[str]
    temperature: float
    choices_method: Any

    def __post_init__(self) -> None:
        self.choices = list(self.choices)

    def describe(self) -> str:
        return f"Select({self.name!r}, choices={self.choices!r})"


@_node
class Image(Expr):
    """An image (path, bytes or PIL image) attached to the prompt at this position."""

    kind = "image"
    source: Any

    def describe(self) -> str:
        shown = self.source if isinstance(self.source, str) else type(self.source).__name__
        return f"Image({shown!r})"


@_node
class Video(Expr):
    """A video (file path or bytes, sampled to `num_frames` frames; or a list of frames)
    attached to the prompt at this position."""

    kind = "video"
    source: Any
    num_frames: int

    def describe(self) -> str:
        shown = self.source if isinstance(self.source, str) else type(self.source).__name__
        return f"Video({shown!r}, num_frames={self.num_frames})"


@_node
class _RoleMarker(Expr):
    role: str

    def describe(self) -> str:
        return f"{type(self).__name__}({self.role!r})"


class RoleBegin(_RoleMarker):
    """Opens a turn of `role` (the chat template's prefix)."""

    kind = "role_begin"


class RoleEnd(_RoleMarker):
    """Closes the turn of `role` (the chat template's suffix)."""

    kind = "role_end"


class VarScopeBegin(_Named):
    """The text appended from here to the matching `VarScopeEnd` becomes variable `name`."""

    kind = "var_scope_begin"


class VarScopeEnd(_Named):
    kind = "var_scope_end"


@_node
class Variable(_TraceOpaque, Expr):
    """The value of variable `name` produced by node `source_id` (a traced reference).

    Reading its value in Python (branching, formatting, comparing) is data-dependent control
    flow, which a trace cannot represent: those operations raise `TraceError`.
    """

    kind = "variable"
    name: str
    source_id: int | None

    def describe(self) -> str:
        return f"Variable({self.name!r}, source=%{self.source_id})"

    def _unavailable(self, what: str) -> TraceError:
        return TraceError(
            f"the program {what} generated variable {self.name!r} in Python code "
            "(data-dependent control flow), which cannot be traced; run it with f.run() instead"
        )

    def __eq__(self, other: object) -> bool:
        raise self._unavailable("compares the")

    def __hash__(self) -> int:
        return id(self)

    def __getitem__(self, key: Any) -> Any:
        raise self._unavailable("indexes the")

    def __int__(self) -> int:
        raise self._unavailable("converts to int the")

    def __float__(self) -> float:
        raise self._unavailable("converts to float the")


class CommitLazy(Expr):
    """Send the text so far to the backend to be cached (the fork prefix hint)."""

    kind = "commit_lazy"


@_node
class ConcatenateAndAppend(Expr):
    """Append the text that forked states added since the fork (`join(mode="concate_and_append")`)."""

    kind = "concatenate_and_append"
    states: list[Any]

    def __post_init__(self) -> None:
        self.states = list(self.states)


@_node
class Fork(Expr):
    """Tracer only: the parent stream forks `size` child streams here."""

    kind = "fork"
    size: int

    def describe(self) -> str:
        return f"Fork({self.size})"


@_node
class GetForkItem(Expr):
    """Tracer only: the first node of fork child `index`; copies the parent's state at the fork."""

    kind = "get_fork_item"
    fork_id: int
    index: int

    def describe(self) -> str:
        return f"GetForkItem(%{self.fork_id}, {self.index})"


@_node
class Join(Expr):
    """Tracer only: gather the variables of child streams into the parent (as lists)."""

    kind = "join"
    child_last_ids: list[int | None]
    mode: str = "gather_variable"

    def __post_init__(self) -> None:
        self.child_last_ids = list(self.child_last_ids)

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
