"""`Program` (what `@sgl.function` returns) and how programs run: one, a batch, or streamed."""

from __future__ import annotations

import contextvars
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sglr.lang.global_config import global_config
from sglr.lang.sampling import SamplingParams
from sglr.lang.state import ProgramState
from sglr.lang.stream_executor import StreamExecutor

T = TypeVar("T")
R = TypeVar("R")

#: Run-level sampling keywords (as `run()` spells them) and their defaults.
RUN_SAMPLING_DEFAULTS: dict[str, Any] = {
    "max_new_tokens": 128,
    "min_new_tokens": 0,
    "n": 1,
    "stop": None,
    "stop_token_ids": None,
    "stop_regex": None,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "ignore_eos": False,
    "return_logprob": None,
    "logprob_start_len": None,
    "top_logprobs_num": None,
    "return_text_in_logprobs": None,
}


def split_sampling_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits `run(**kwargs)` into sampling parameters and program arguments."""
    sampling = {key: kwargs[key] for key in RUN_SAMPLING_DEFAULTS if key in kwargs}
    if "max_tokens" in kwargs and "max_new_tokens" not in kwargs:
        sampling["max_new_tokens"] = kwargs["max_tokens"]
    arguments = {k: v for k, v in kwargs.items() if k not in RUN_SAMPLING_DEFAULTS and k != "max_tokens"}
    return sampling, arguments


# The backend of the program whose body is running: nested program calls default to it.
_RUNNING_BACKEND: contextvars.ContextVar[Any] = contextvars.ContextVar("sglr_backend", default=None)


def resolve_backend(backend: Any) -> Any:
    """The given backend, else the calling program's, else the default, as a backend object."""
    if backend is None:
        backend = _RUNNING_BACKEND.get()
    backend = backend if backend is not None else global_config.default_backend
    if backend is None:
        raise ValueError("Please specify a backend: pass backend=... or call sgl.set_default_backend(...)")
    return as_backend(backend)


def as_backend(backend: Any) -> Any:
    """A `Runtime` stands for its endpoint; an in-process `Engine` is wrapped in an `EngineBackend`."""
    backend = getattr(backend, "endpoint", backend)
    # NOTE: looked up in sys.modules, so that checking never imports the engine (and torch).
    engine_module = sys.modules.get("sglr.engine.engine")
    if engine_module is not None and isinstance(backend, engine_module.Engine):
        from sglr.lang.backend.engine_backend import EngineBackend

        return EngineBackend(backend)
    return backend


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
        self._prefix_graph: Any = None
        self.__doc__ = func.__doc__

    def bind(self, **kwargs: Any) -> Program:
        unknown = [name for name in kwargs if name not in self.arg_names]
        if unknown:
            raise TypeError(f"{self.name}() has no arguments {unknown}")
        return Program(self.func, self.num_api_spec_tokens, {**self.bind_arguments, **kwargs})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from sglr.lang.tracer import current_session

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
        sampling, arguments = split_sampling_kwargs(kwargs)
        params = SamplingParams(**{**RUN_SAMPLING_DEFAULTS, **sampling})
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
        unknown = [key for key in sampling if key not in RUN_SAMPLING_DEFAULTS and key != "max_tokens"]
        if unknown:
            raise TypeError(f"run_batch() got unexpected keyword arguments {unknown}")
        params_kwargs, _ = split_sampling_kwargs(sampling)
        params = SamplingParams(**{**RUN_SAMPLING_DEFAULTS, **params_kwargs})
        batch = [self._batch_item(item) for item in batch_kwargs]
        if not batch:
            return []
        backend = resolve_backend(backend)
        if len(batch) > 1 and global_config.enable_precache_with_tracing:
            self.cache(backend)

        def run_one(arguments: dict[str, Any]) -> ProgramState:
            return run_program(self, backend, (), arguments, params, False, sync=True, capture_errors=True)

        if generator_style:
            return _generate_in_order(run_one, batch, num_threads, progress_bar)
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

    def trace(self, *, backend: Any = None, **kwargs: Any) -> Any:
        """The IR graph of the program (`ProgramGraph`); missing arguments become placeholders."""
        from sglr.lang.tracer import trace_program

        return trace_program(self, kwargs)

    def compile(self, *, backend: Any = None) -> Any:
        """A `CompiledProgram` that runs the traced graph (raises TraceError if untraceable)."""
        from sglr.lang.compiler import CompiledProgram

        return CompiledProgram(self.trace(), self.arg_defaults)

    def cache(self, backend: Any = None) -> str:
        """Sends the prompt prefix shared by every run to the backend to be cached; returns it."""
        from sglr.lang.compiler import send_prefix_hint
        from sglr.lang.tracer import trace_prefix_graph

        if self._prefix_graph is None:
            self._prefix_graph = trace_prefix_graph(self)
        return send_prefix_hint(self._prefix_graph, resolve_backend(backend))

    def __repr__(self) -> str:
        return f"<sglr program {self.name}({', '.join(self.arg_names)})>"


def run_program(
    program: Program,
    backend: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    params: SamplingParams,
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
    token = _RUNNING_BACKEND.set(executor.backend)
    try:
        state.ret_value = program.func(state, *args, **kwargs)
    except Exception as exc:
        if not capture:
            raise
        executor.fail(exc, primitive=f"{program.name}()")
    finally:
        _RUNNING_BACKEND.reset(token)
        executor.end()
        if sync:
            executor.sync()
    if global_config.verbosity >= 2 and executor.error_ is None:
        print(state.text())


def _resolve_num_threads(num_threads: int | str, num_items: int) -> int:
    if num_threads == "auto":
        num_threads = max(96, (os.cpu_count() or 1) * 16)
    if not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be 'auto' or a positive int, got {num_threads!r}")
    return max(1, min(num_threads, num_items))


def map_in_threads(
    func: Callable[[T], R], items: Sequence[T], num_threads: int | str, progress_bar: bool
) -> list[R]:
    """`[func(x) for x in items]` on a thread pool, in input order, with an optional tqdm bar."""
    num_threads = _resolve_num_threads(num_threads, len(items))
    bar = _progress_bar(len(items)) if progress_bar else None
    try:
        if num_threads == 1:
            results = []
            for item in items:
                results.append(func(item))
                if bar is not None:
                    bar.update(1)
            return results
        with ThreadPoolExecutor(num_threads) as pool:
            futures = [pool.submit(func, item) for item in items]
            if bar is not None:
                for future in futures:
                    future.add_done_callback(lambda _: bar.update(1))
            return [future.result() for future in futures]
    finally:
        if bar is not None:
            bar.close()


def _generate_in_order(
    func: Callable[[T], R], items: Sequence[T], num_threads: int | str, progress_bar: bool
) -> Iterator[R]:
    chunk = 200
    for start in range(0, len(items), chunk):
        yield from map_in_threads(func, items[start : start + chunk], num_threads, progress_bar)


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total)
