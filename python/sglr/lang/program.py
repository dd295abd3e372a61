"""`Program` (what `@sgl.function` returns) and how programs run: one, a batch, or streamed."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sglr.lang.backend_resolution import resolve_backend, running_on
from sglr.lang.compiler import CompiledProgram, send_prefix_hint
from sglr.lang.gen_params import GenParams, batch_run_params, split_run_kwargs
from sglr.lang.global_config import global_config
from sglr.lang.graph import ProgramGraph
from sglr.lang.state import ProgramState
from sglr.lang.stream_executor import StreamExecutor
from sglr.lang.thread_map import map_in_order, map_in_threads
from sglr.lang.tracer import current_session, trace_prefix_graph, trace_program


class Program:
    """An LM program: a Python function whose first parameter `s` is the prompt state."""

    def __init__(
        self,
        func: Callable[..., Any],
        num_api_spec_tokens: int | None = None,
        bind_arguments: dict[str, Any] | None = None,
    ) -> None:
        parameters = list(inspect.signature(func).parameters.values())
        if not parameters or parameters[0].name != "s":
            raise ValueError(f'The first argument must be "s" (in {func.__name__})')
        if num_api_spec_tokens is not None and num_api_spec_tokens < 1:
            raise ValueError(f"num_api_spec_tokens must be at least 1, got {num_api_spec_tokens}")
        self.func = func
        self.name = func.__name__
        self.num_api_spec_tokens = num_api_spec_tokens
        self.bind_arguments = dict(bind_arguments or {})
        self.arg_names = [p.name for p in parameters[1:]]
        self.arg_defaults = {p.name: p.default for p in parameters[1:] if p.default is not p.empty}
        self._prefix_graph: ProgramGraph | None = None
        self.__doc__ = func.__doc__

    def bind(self, **kwargs: Any) -> Program:
        unknown = [name for name in kwargs if name not in self.arg_names]
        if unknown:
            raise TypeError(f"{self.name}() has no arguments {unknown}")
        return Program(self.func, self.num_api_spec_tokens, {**self.bind_arguments, **kwargs})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is not None:
            bound = {
                **self.arg_defaults,
                **self.bind_arguments,
                **dict(zip(self.arg_names, args, strict=False)),
                **kwargs,
            }
            return session.trace_call(self, {"origin": "call", "function_name": self.name}, bound)
        return self.run(*args, **kwargs)

    def run(
        self,
        *args: Any,
        stream: bool = False,
        backend: Any = None,
        use_thread: bool = True,
        **kwargs: Any,
    ) -> ProgramState:
        """Runs the program; returns its state at once (reads block until results are ready).

        Keyword arguments that are sampling parameters (`max_new_tokens`, `temperature`, ...)
        become defaults for every `gen`; the rest are the program's arguments. With
        `stream=True` the program body runs on a thread and the state streams its text.
        """
        params, arguments = split_run_kwargs(kwargs)
        return run_program(
            self, resolve_backend(backend), args, arguments, params, stream, use_thread=use_thread
        )

    def run_batch(
        self,
        batch_kwargs: Sequence[dict[str, Any] | Sequence[Any]],
        *,
        backend: Any = None,
        num_threads: int | str = "auto",
        progress_bar: bool = False,
        generator_style: bool = False,
        **sampling: Any,
    ) -> list[ProgramState] | Iterator[ProgramState]:
        """Runs the program once per argument set, in parallel; results keep the input order.

        A failing program does not stop the others: its error is raised where its state is read.
        With more than one program, the constant prefix of the prompt is cached once first.
        """
        params = batch_run_params(sampling)
        batch = [self._batch_item(item) for item in batch_kwargs]
        if not batch:
            return []
        backend = resolve_backend(backend)
        if len(batch) > 1 and global_config.enable_precache_with_tracing:
            self.cache(backend, params.lora_path)

        def run_one(arguments: dict[str, Any]) -> ProgramState:
            return run_program(self, backend, (), arguments, params, False, sync=True, capture_errors=True)

        if generator_style:
            return map_in_order(run_one, batch, num_threads, progress_bar)
        return map_in_threads(run_one, batch, num_threads, progress_bar)

    def _batch_item(self, item: dict[str, Any] | Sequence[Any]) -> dict[str, Any]:
        if isinstance(item, dict):
            return item
        if len(item) != len(self.arg_names):
            raise ValueError(
                f"Given arguments mismatch the SGL function signature: {self.name}() takes "
                f"{self.arg_names}, got {len(item)} values"
            )
        return dict(zip(self.arg_names, item, strict=False))

    def trace(self, *, backend: Any = None, **kwargs: Any) -> ProgramGraph:
        """The IR graph of the program; missing arguments become placeholders."""
        return trace_program(self, kwargs)

    def compile(self, *, backend: Any = None) -> CompiledProgram:
        """A program that runs the traced graph (raises TraceError if untraceable)."""
        return CompiledProgram(self.trace(), self.arg_defaults)

    def cache(self, backend: Any = None, lora_path: str | None = None) -> str:
        """Sends the prompt prefix shared by every run to the backend to be cached (for the
        LoRA adapter `lora_path`, when the runs use one); returns it."""
        if self._prefix_graph is None:
            self._prefix_graph = trace_prefix_graph(self)
        return send_prefix_hint(self._prefix_graph, resolve_backend(backend), lora_path)

    def __repr__(self) -> str:
        return f"<sglr program {self.name}({', '.join(self.arg_names)})>"


def run_program(
    program: Program,
    backend: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    params: GenParams,
    stream: bool,
    *,
    sync: bool = False,
    use_thread: bool = True,
    capture_errors: bool = False,
) -> ProgramState:
    kwargs = {**program.bind_arguments, **kwargs}
    executor = StreamExecutor(
        backend,
        kwargs,
        params,
        stream=stream,
        num_api_spec_tokens=program.num_api_spec_tokens,
        use_thread=use_thread,
    )
    state = ProgramState(executor)
    if stream:
        thread = threading.Thread(
            target=_run_body, args=(program, state, args, kwargs, sync, True), daemon=True
        )
        thread.start()
        return state
    _run_body(program, state, args, kwargs, sync, capture_errors)
    return state


def _run_body(
    program: Program,
    state: ProgramState,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    sync: bool,
    capture: bool,
) -> None:
    executor = state.stream_executor
    try:
        with running_on(executor.backend):
            state.ret_value = program.func(state, *args, **kwargs)
    except Exception as exc:
        if not capture:
            raise
        executor.fail(exc, primitive=f"{program.name}()")
    finally:
        executor.end()
        if sync:
            executor.sync()
    if global_config.verbosity >= 2 and executor.error_ is None:
        print(state.text())
