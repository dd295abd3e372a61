"""`ProgramState` (the `s` of an LM program) and `ProgramStateGroup` (what `s.fork(n)` returns)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from sglr.errors import ProgramError
from sglr.lang import ir
from sglr.lang.state_surface import ForkedStates, StateSurface, check_join_mode
from sglr.lang.stream_executor import StreamExecutor


class ProgramState(StateSurface):
    """The prompt state a program appends to. Reads (`s["x"]`, `s.text()`) block until ready."""

    def __init__(self, stream_executor: StreamExecutor) -> None:
        self.stream_executor = stream_executor
        self.ret_value: Any = None

    # --- appending ---------------------------------------------------------------------------------
    def _append(self, expr: Any) -> None:
        self.stream_executor.submit(expr)

    # --- reading -----------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        return self.stream_executor.get_var(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.stream_executor.set_var(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self.stream_executor.variables

    def get_var(self, name: str) -> Any:
        return self.stream_executor.get_var(name)

    def set_var(self, name: str, value: Any) -> None:
        self.stream_executor.set_var(name, value)

    def get_meta_info(self, name: str) -> Any:
        return self.stream_executor.get_meta_info(name)

    def text(self) -> str:
        return self.stream_executor.checked_text()

    def messages(self) -> list[dict]:
        self.stream_executor.checked_text()
        return self.stream_executor.messages_

    def sync(self) -> None:
        self.stream_executor.sync()

    def error(self) -> ProgramError | None:
        """The error that stopped this program, or None (does not raise)."""
        self.stream_executor.sync()
        return self.stream_executor.error_

    def end(self) -> None:
        self.stream_executor.end()

    # --- fork --------------------------------------------------------------------------------------
    def fork(self, size: int = 1, position_ids_offset: Any = None) -> ProgramStateGroup:
        """`size` copies of this state that run in parallel; `join()` gathers their variables.

        With size > 1 the shared prefix is first sent to the backend to be cached (the
        frontend hint), so the branches reuse it instead of each prefilling it.
        """
        if size < 1:
            raise ValueError(f"fork size must be at least 1, got {size}")
        executor = self.stream_executor
        if size > 1:
            executor.submit(ir.CommitLazy())
        executor.sync()
        if executor.error_ is not None:
            raise executor._error_for("the state to fork")
        children = executor.fork_children(size)
        return ProgramStateGroup([ProgramState(child) for child in children], self)

    # --- streaming ---------------------------------------------------------------------------------
    def text_iter(self, var_name: str | None = None) -> Iterator[str]:
        """Yields the program text (or variable `var_name`) as it grows."""
        executor = self.stream_executor
        if not executor.stream:
            yield self.text() if var_name is None else self[var_name]
            return
        position = 0
        while True:
            chunk, position, done = _next_chunk(executor, var_name, position)
            if chunk:
                yield chunk
            if done:
                return

    async def text_async_iter(
        self, var_name: str | None = None, return_meta_data: bool = False
    ) -> AsyncIterator[Any]:
        """Async `text_iter`; with `return_meta_data` yields `(chunk, meta_info)` pairs."""
        import asyncio  # only async callers pay for importing asyncio

        executor = self.stream_executor
        loop = asyncio.get_running_loop()
        if not executor.stream:
            value = await loop.run_in_executor(
                None, self.text if var_name is None else lambda: self[var_name]
            )
            yield (value, executor.meta_info.get(var_name)) if return_meta_data else value
            return
        position = 0
        while True:
            chunk, position, done = await loop.run_in_executor(
                None, _next_chunk, executor, var_name, position
            )
            if chunk:
                yield (chunk, executor.meta_info.get(var_name)) if return_meta_data else chunk
            if done:
                return

    def __repr__(self) -> str:
        return f"ProgramState({self.stream_executor.text_!r})"

    def __del__(self) -> None:
        # Lets the worker thread exit when a state (e.g. an unjoined fork) is dropped.
        with contextlib.suppress(Exception):
            self.stream_executor.end()


def _next_chunk(executor: StreamExecutor, var_name: str | None, position: int) -> tuple[str, int, bool]:
    """Waits for new text past `position`; returns `(chunk, new_position, done)`.

    Raises the program's error once everything produced before it has been yielded.
    """
    with executor._cond:

        def current() -> str | None:
            if var_name is None:
                return executor.text_
            value = executor.variables.get(var_name)
            return value if isinstance(value, str) else None

        def finished() -> bool:
            if executor.error_ is not None or executor.is_finished:
                return True
            return (
                var_name is not None
                and executor._pending_vars.get(var_name, 0) == 0
                and (var_name in executor.variables)
            )

        executor._cond.wait_for(lambda: len(current() or "") > position or finished())
        text = current() or ""
        chunk = text[position:]
        done = finished() and not chunk
        if done and executor.error_ is not None:
            raise executor._error_for("the streamed text" if var_name is None else f"variable {var_name!r}")
        return chunk, len(text), done


class ProgramStateGroup(ForkedStates[ProgramState]):
    """The running states of `s.fork(n)`."""

    def __init__(self, states: list[ProgramState], src_state: ProgramState) -> None:
        super().__init__(states, src_state)
        self._joined = False

    def join(self, mode: str = "gather_variable") -> None:
        """Waits for every fork and merges it into the source state.

        `gather_variable`: each variable the forks produced becomes a list in the source state
        (fork order). `concate_and_append`: the text each fork added is appended to the source.
        Raises the first fork's error (naming the fork) after all forks have stopped.
        """
        check_join_mode(mode)
        if self._joined:
            return
        self._joined = True
        executors = [state.stream_executor for state in self.states]
        for executor in executors:
            executor.sync()
        try:
            for index, executor in enumerate(executors):
                if executor.error_ is not None:
                    raise ProgramError(
                        f"fork {index} of {len(executors)} failed: {executor.error_}",
                        primitive=executor.error_.primitive,
                    ) from executor.error_.__cause__
            if mode == "concate_and_append":
                self.src_state.stream_executor.submit(ir.ConcatenateAndAppend(executors))
                self.src_state.stream_executor.sync()
            else:
                gather_variables(self.src_state.stream_executor, executors)
        finally:
            for executor in executors:
                executor.end()


def gather_variables(parent: StreamExecutor, children: list[StreamExecutor]) -> dict[str, list]:
    """Sets each variable the children produced to the list of their values (child order)."""
    gathered: dict[str, list] = {}
    for child in children:
        for name in sorted(child._produced_vars):
            gathered.setdefault(name, []).append(child.variables[name])
    with parent._cond:
        for name, values in gathered.items():
            parent.variables[name] = values
            parent.meta_info[name] = [child.meta_info.get(name) for child in children]
        parent._cond.notify_all()
    return gathered
