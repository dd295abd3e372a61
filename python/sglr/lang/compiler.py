"""The graph executor: runs a traced `ProgramGraph` with one stream executor per graph stream.

All nodes are submitted up front in node-id order (a topological order), each to its stream's
queue. A stream's worker blocks only on nodes of other streams it depends on (a variable's
producer, the fork it starts from, the children a join waits for), so independent streams run in
parallel and no Python code of the program runs at all. Since every dependency has a smaller id
and each stream runs its nodes in id order, the node with the smallest unfinished id can always
run: no deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglr.lang import ir
from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend_resolution import resolve_backend
from sglr.lang.gen_params import GenParams, batch_run_params, split_run_kwargs
from sglr.lang.global_config import global_config
from sglr.lang.graph import ProgramGraph
from sglr.lang.state import ProgramState, gather_variables
from sglr.lang.stream_executor import StreamExecutor
from sglr.lang.thread_map import map_in_threads


class GraphRun:
    """One execution of a graph; executes the graph-only nodes for the stream executors."""

    def __init__(self, graph: ProgramGraph, executors: dict[int, StreamExecutor]) -> None:
        self.graph = graph
        self.executors = executors
        self.fork_snapshots: dict[int, dict[str, Any]] = {}

    def _executor_of(self, node_id: int) -> StreamExecutor:
        return self.executors[self.graph.node(node_id).stream_id]

    def execute(self, executor: StreamExecutor, expr: ir.Expr) -> None:
        if isinstance(expr, ir.Variable):
            executor._fill_value(self.read_variable(expr))
        elif isinstance(expr, ir.Fork):
            if expr.size > 1:
                executor._execute(ir.CommitLazy())
            self.fork_snapshots[executor._current_node_id] = executor.snapshot_state()
        elif isinstance(expr, ir.GetForkItem):
            self._executor_of(expr.fork_id).wait_node(expr.fork_id)
            executor.restore_state(self.fork_snapshots[expr.fork_id])
        elif isinstance(expr, ir.Join):
            children = []
            for last_id in expr.child_last_ids:
                child = self._executor_of(last_id)
                child.wait_node(last_id)
                children.append(child)
            if expr.mode == "concate_and_append":
                for child in children:
                    executor._fill(child.text_[child.fork_start_text_pos :])
            else:
                gathered = gather_variables(executor, children)
                with executor._cond:
                    for name, values in gathered.items():
                        executor.node_values[(executor._current_node_id, name)] = values
                    executor._cond.notify_all()
        else:
            raise TypeError(f"{expr.describe()} cannot run in a compiled program")

    def read_variable(self, expr: ir.Variable) -> Any:
        if expr.source_id is None:
            raise ValueError(f"variable {expr.name!r} has no producer in the graph")
        return self._executor_of(expr.source_id).wait_node_value(expr.source_id, expr.name)


class CompiledProgram:
    """`f.compile()`: a program as a graph, run without re-executing its Python code."""

    def __init__(
        self,
        graph: ProgramGraph,
        arg_defaults: dict[str, Any] | None = None,
    ) -> None:
        self.graph = graph
        self.arg_defaults = dict(arg_defaults or {})

    def print_graph(self) -> None:
        self.graph.print()

    def _bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = self.graph.arg_names
        if len(args) > len(names):
            raise TypeError(f"{self.graph.function_name}() takes {len(names)} arguments, got {len(args)}")
        arguments = {**self.arg_defaults, **dict(zip(names, args, strict=False)), **kwargs}
        missing = [name for name in names if name not in arguments]
        if missing:
            raise TypeError(f"{self.graph.function_name}() is missing arguments: {', '.join(missing)}")
        return arguments

    def run(self, *args: Any, backend: Any = None, **kwargs: Any) -> ProgramState:
        params, arguments = split_run_kwargs(kwargs)
        backend = resolve_backend(backend)
        arguments = self._bind(args, arguments)
        return self._start(backend, arguments, params)

    def run_batch(
        self,
        batch_kwargs: Sequence[dict[str, Any]],
        *,
        backend: Any = None,
        num_threads: int | str = "auto",
        progress_bar: bool = False,
        **sampling: Any,
    ) -> list[ProgramState]:
        backend = resolve_backend(backend)
        params = batch_run_params(sampling)
        bound = [self._bind((), dict(kwargs)) for kwargs in batch_kwargs]
        if len(bound) > 1:
            send_prefix_hint(self.graph, backend, params.lora_path)

        def run_one(arguments: dict[str, Any]) -> ProgramState:
            state = self._start(backend, arguments, params)
            state.sync()
            return state

        return map_in_threads(run_one, bound, num_threads, progress_bar)

    def _start(self, backend: Any, arguments: dict[str, Any], params: GenParams) -> ProgramState:
        executors: dict[int, StreamExecutor] = {}
        run = GraphRun(self.graph, executors)
        for stream in self.graph.streams:
            executor = StreamExecutor(
                backend, arguments, params, num_api_spec_tokens=stream.num_api_spec_tokens
            )
            executor.graph_run = run
            executors[stream.stream_id] = executor
        for node in self.graph.nodes:
            executors[node.stream_id].submit(node.expr, node_id=node.node_id)
        for executor in executors.values():
            executor.end()
        state = ProgramState(executors[self.graph.root_stream_id])
        state.graph_run = run  # keeps the other streams reachable while the state is used
        return state


def constant_prefix_text(graph: ProgramGraph, backend: Any) -> str:
    """The prompt text the constant prefix of `graph` renders to with `backend`'s chat template."""
    nodes = graph.constant_prefix_nodes()
    if not nodes:
        return ""
    renderer = StreamExecutor(
        BaseBackend(), {}, GenParams(), chat_template=backend.get_chat_template(), use_thread=False
    )
    for node in nodes:
        renderer.submit(node.expr)
    renderer.end()
    if renderer.error_ is not None:
        return ""
    return renderer.text_


def send_prefix_hint(graph: ProgramGraph, backend: Any, lora_path: str | None = None) -> str:
    """Sends the graph's constant prefix to the backend to be cached, if it is long enough
    (cached for the LoRA adapter `lora_path` the runs use, when they use one)."""
    prefix = constant_prefix_text(graph, backend)
    if len(prefix) >= global_config.min_prefix_hint_chars:
        if lora_path is None:
            backend.cache_prefix(prefix)
        else:
            backend.cache_prefix(prefix, lora_path=lora_path)
        return prefix
    return ""
