"""The tracer: runs a program against placeholder states and records its IR graph.

Arguments without a value become `Argument` placeholders and generated values become `Variable`
references; both refuse to be read in Python (branching, formatting, indexing), so a program
whose control flow depends on data fails with a `TraceError` that says where and why.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from sglr.errors import TraceError
from sglr.lang import ir
from sglr.lang.graph import GraphNode, ProgramGraph, StreamInfo
from sglr.lang.state_surface import ForkedStates, StateSurface, check_join_mode


class TraceableProgram(Protocol):
    """What the tracer reads of a program (`sglr.lang.program.Program` has it): the tracer sits
    below the program layer and never imports it."""

    func: Callable[..., Any]
    name: str
    arg_names: list[str]
    bind_arguments: dict[str, Any]


_SESSION: contextvars.ContextVar[TraceSession | None] = contextvars.ContextVar("sglr_trace", default=None)
_LANG_DIR = os.path.dirname(os.path.abspath(__file__))


def current_session() -> TraceSession | None:
    return _SESSION.get()


class TraceSession:
    """Builds one graph; nested program calls traced inside it add streams to the same graph."""

    def __init__(self, function_name: str, arg_names: list[str]) -> None:
        self.graph = ProgramGraph(function_name, list(arg_names))

    def new_stream(self, **info: Any) -> int:
        stream_id = len(self.graph.streams)
        self.graph.streams.append(StreamInfo(stream_id, **info))
        return stream_id

    def add(self, stream_id: int, prev_id: int | None, expr: ir.Expr, deps: tuple[int, ...] = ()) -> int:
        node_id = len(self.graph.nodes)
        self.graph.nodes.append(GraphNode(node_id, stream_id, expr, prev_id, deps))
        return node_id

    def trace_call(
        self, program: TraceableProgram, stream_info: dict[str, Any], kwargs: dict[str, Any]
    ) -> TracerState:
        stream_id = self.new_stream(**stream_info)
        state = TracerState(self, stream_id)
        token = _SESSION.set(self)
        try:
            program.func(state, **kwargs)
        finally:
            _SESSION.reset(token)
        return state


class TracerState(StateSurface):
    """Stands in for `ProgramState` while tracing; records instead of executing."""

    def __init__(self, session: TraceSession, stream_id: int) -> None:
        self.session = session
        self.stream_id = stream_id
        self.last_node_id: int | None = None
        self.variables: dict[str, ir.Variable] = {}
        self.produced: set[str] = set()
        self.ret_value: Any = None

    # --- recording ---------------------------------------------------------------------------------
    def _add(self, expr: ir.Expr, deps: tuple[int, ...] = ()) -> int:
        self.last_node_id = self.session.add(self.stream_id, self.last_node_id, expr, deps)
        return self.last_node_id

    def _append(self, expr: Any) -> None:
        expr = ir.as_expr(expr)
        for leaf in expr.exprs if isinstance(expr, ir.ExprList) else [expr]:
            self._record(leaf)

    def _record(self, expr: ir.Expr) -> None:
        if isinstance(expr, ir.Variable):
            deps = (expr.source_id,) if expr.source_id is not None else ()
            self._add(expr, deps)
        elif isinstance(expr, (ir.Gen, ir.Select, ir.VarScopeEnd)):
            node_id = self._add(expr)
            if expr.name is not None:
                self.variables[expr.name] = ir.Variable(expr.name, node_id)
                self.produced.add(expr.name)
        elif isinstance(
            expr,
            (ir.ConstantText, ir.Argument, ir.RoleBegin, ir.RoleEnd, ir.Image, ir.Video, ir.VarScopeBegin),
        ):
            self._add(expr)
        else:
            raise TraceError(f"{expr.describe()} cannot be appended in a traced program")

    # --- the ProgramState surface ------------------------------------------------------------------
    def __getitem__(self, name: str) -> ir.Variable:
        try:
            return self.variables[name]
        except KeyError:
            raise KeyError(f"no variable {name!r} has been generated at this point of the trace") from None

    def __setitem__(self, name: str, value: Any) -> None:
        raise TraceError(f"the program assigns variable {name!r} in Python code, which cannot be traced")

    def __contains__(self, name: str) -> bool:
        return name in self.variables

    def get_var(self, name: str) -> ir.Variable:
        return self[name]

    def fork(self, size: int = 1, position_ids_offset: Any = None) -> TracerStateGroup:
        if not isinstance(size, int) or size < 1:
            raise TraceError(f"fork size must be a constant int >= 1 to be traced, got {size!r}")
        fork_id = self._add(ir.Fork(size))
        children = []
        for index in range(size):
            spec = self.session.graph.streams[self.stream_id].num_api_spec_tokens
            stream_id = self.session.new_stream(
                origin="fork", fork_id=fork_id, fork_index=index, num_api_spec_tokens=spec
            )
            child = TracerState(self.session, stream_id)
            child.variables = dict(self.variables)
            child._add(ir.GetForkItem(fork_id, index), (fork_id,))
            children.append(child)
        return TracerStateGroup(children, self)

    def sync(self) -> None:
        """Nothing runs while tracing."""

    def error(self) -> None:
        return None

    def _unreadable(self, what: str) -> TraceError:
        return TraceError(f"the program reads {what} in Python code, which cannot be traced")

    def text(self) -> str:
        raise self._unreadable("s.text()")

    def messages(self) -> list[dict]:
        raise self._unreadable("s.messages()")

    def get_meta_info(self, name: str) -> Any:
        raise self._unreadable(f"the meta info of {name!r}")

    def text_iter(self, var_name: str | None = None) -> Any:
        raise self._unreadable("a text stream")


class TracerStateGroup(ForkedStates[TracerState]):
    """The traced states of `s.fork(n)`; `join()` records a join node."""

    def join(self, mode: str = "gather_variable") -> None:
        check_join_mode(mode)
        last_ids = [state.last_node_id for state in self.states]
        join_id = self.src_state._add(ir.Join(last_ids, mode), tuple(i for i in last_ids if i is not None))
        if mode == "gather_variable":
            for name in sorted(set().union(*(state.produced for state in self.states))):
                self.src_state.variables[name] = ir.Variable(name, join_id)
                self.src_state.produced.add(name)


def _user_location(exc: BaseException) -> str:
    """`file:line` of the innermost traceback frame outside sglr.lang (the user's code)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not os.path.abspath(frame.filename).startswith(_LANG_DIR):
            return f" (at {frame.filename}:{frame.lineno}: {frame.line})"
    return ""


def trace_program(program: TraceableProgram, arguments: dict[str, Any]) -> ProgramGraph:
    """Traces `program`; arguments missing from `arguments` become placeholders."""
    session = TraceSession(program.name, program.arg_names)
    kwargs = {name: arguments.get(name, ir.Argument(name)) for name in program.arg_names}
    kwargs.update({k: v for k, v in program.bind_arguments.items() if k not in arguments})
    try:
        session.trace_call(program, {"origin": "root", "function_name": program.name}, kwargs)
    except TraceError as exc:
        raise TraceError(f"cannot trace {program.name}(): {exc}{_user_location(exc)}") from exc
    except (TypeError, AttributeError, KeyError) as exc:
        raise TraceError(
            f"cannot trace {program.name}(): {type(exc).__name__}: {exc}{_user_location(exc)}"
        ) from exc
    return session.graph


def trace_prefix_graph(program: TraceableProgram) -> ProgramGraph:
    """The graph recorded up to the first point tracing fails (enough to find the constant prefix)."""
    session = TraceSession(program.name, program.arg_names)
    kwargs = {name: ir.Argument(name) for name in program.arg_names}
    kwargs.update(program.bind_arguments)
    with contextlib.suppress(TraceError, TypeError, AttributeError, KeyError, ValueError):
        session.trace_call(program, {"origin": "root", "function_name": program.name}, kwargs)
    return session.graph
