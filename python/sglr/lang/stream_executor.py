"""The interpreter: one `StreamExecutor` per prompt state runs its nodes on a worker thread.

`submit` only enqueues, so the user's Python keeps going while the backend works; reading a
variable waits until the node that produces it has run. All shared state is guarded by one
condition variable (`_cond`), which also wakes streaming readers.

Errors: the first failing node stores a `ProgramError` naming it; every later node of the stream
is skipped, every waiter is released, and the error is raised where the user reads a result
(`s[...]`, `s.text()`, `join()`), never in the worker and never as a hang.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from typing import TYPE_CHECKING, Any

from sglr.errors import ProgramError
from sglr.lang import ir
from sglr.lang.executor_generation import GenerationMixin
from sglr.lang.executor_roles import RoleMixin
from sglr.lang.speculative import GenPart, TextPart, consume

if TYPE_CHECKING:
    from sglr.lang.backend.base import BaseBackend
    from sglr.lang.chat_template import ChatTemplate
    from sglr.lang.gen_params import GenParams

logger = logging.getLogger(__name__)


class StreamExecutor(RoleMixin, GenerationMixin):
    def __init__(
        self,
        backend: BaseBackend,
        arguments: dict[str, Any],
        default_sampling_params: GenParams,
        chat_template: ChatTemplate | None = None,
        stream: bool = False,
        num_api_spec_tokens: int | None = None,
        use_thread: bool = True,
    ) -> None:
        self.sid = uuid.uuid4().hex
        self.backend = backend
        self.arguments = arguments
        self.default_sampling_params = default_sampling_params
        self.chat_template = chat_template or backend.get_chat_template()
        self.stream = stream
        self.num_api_spec_tokens = num_api_spec_tokens
        self.use_thread = use_thread

        self.variables: dict[str, Any] = {}
        self.meta_info: dict[str, Any] = {}
        self.text_ = ""
        self.messages_: list[dict] = []
        self.images_: list[tuple[Any, str]] = []
        self.cur_images: list[tuple[Any, str]] = []
        self.videos_: list[tuple[Any, list[str]]] = []  # (source, base64 frames)
        self.cur_role: str | None = None
        self.cur_role_begin_pos: int | None = None
        self.fork_start_text_pos: int | None = None
        self.speculated_text = ""
        self.error_: ProgramError | None = None
        self.is_finished = False
        # Hook for compiled graphs (Variable/Fork/GetForkItem/Join nodes); None when eager.
        self.graph_run: Any = None

        self._cond = threading.Condition()
        self._pending_vars: dict[str, int] = {}  # name -> submitted producers not yet run
        self._produced_vars: set[str] = set()  # names this state produced itself (join gathers them)
        self._done_nodes: set[int] = set()  # compiled graphs: node ids that have run
        self._current_node_id: int | None = None
        self.node_values: dict[tuple[int, str], Any] = {}  # compiled graphs: (node id, var) -> value
        self._streaming_vars: set[str] = set()
        self._spec_parts: list[TextPart | GenPart] = []
        self._spec_meta: dict | None = None
        self._scope_starts: dict[str, int] = {}
        self._submitted_role: str | None = None
        self._deferred_vars: set[str] = set()  # chat speculation: ready at the end of the turn
        self._ended = False
        self._current: ir.Expr | None = None
        self._queue: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        if use_thread:
            self._worker = threading.Thread(
                target=self._work, name=f"sglr-stream-{self.sid[:8]}", daemon=True
            )
            self._worker.start()
        backend.begin_program(self)

    # --- submission (user thread) ----------------------------------------------------------------
    def submit(self, expr: Any, node_id: int | None = None) -> None:
        expr = ir.as_expr(expr)
        if self._ended:
            raise ProgramError("cannot append to a program state that has ended", primitive=expr.describe())
        with self._cond:
            for name in ir.variable_names(expr):
                self._pending_vars[name] = self._pending_vars.get(name, 0) + 1
            self._track_speculative_turn(expr)
        if self.use_thread:
            self._queue.put((expr, node_id))
        else:
            self._run_item(expr, node_id)

    def _track_speculative_turn(self, expr: ir.Expr) -> None:
        # Variables of an assistant turn under chat speculation become ready only at its end;
        # remember them so that reading one inside the turn fails instead of waiting forever.
        for leaf in expr.exprs if isinstance(expr, ir.ExprList) else [expr]:
            if isinstance(leaf, ir.RoleBegin):
                self._submitted_role = leaf.role
            elif isinstance(leaf, ir.RoleEnd):
                self._submitted_role = None
                self._deferred_vars.clear()
            elif isinstance(leaf, ir.Gen) and leaf.name and self._chat_speculation(self._submitted_role):
                self._deferred_vars.add(leaf.name)

    def sync(self) -> None:
        if self.use_thread:
            self._queue.join()

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self.use_thread:
            self._queue.put(None)
        else:
            self._finish()
        self.backend.end_program(self)

    # --- reading (user thread) ---------------------------------------------------------------------
    def get_var(self, name: str) -> Any:
        if name not in self._pending_vars and name not in self.variables:
            self.sync()  # not submitted (yet): let queued work finish so the error lists everything
        with self._cond:
            if name in self._deferred_vars:
                raise ProgramError(
                    f"variable {name!r} is read inside the assistant turn that generates it; with "
                    "num_api_spec_tokens on a chat model, its value is ready after the turn ends",
                    primitive=f"Gen({name!r})",
                )
            self._cond.wait_for(lambda: self._pending_vars.get(name, 0) == 0 or self.error_ is not None)
            if self._pending_vars.get(name, 0) == 0 and name in self.variables:
                return self.variables[name]
            if self.error_ is not None:
                raise self._error_for(f"variable {name!r}")
            known = ", ".join(sorted(self.variables)) or "none"
            raise KeyError(f"no variable {name!r} in this program state (variables: {known})")

    def get_meta_info(self, name: str) -> Any:
        self.get_var(name)
        return self.meta_info.get(name)

    def set_var(self, name: str, value: Any) -> None:
        with self._cond:
            self.variables[name] = value
            self._cond.notify_all()

    def checked_text(self) -> str:
        self.sync()
        if self.error_ is not None:
            raise self._error_for("the program text")
        return self.text_

    def _error_for(self, what: str) -> ProgramError:
        assert self.error_ is not None
        error = ProgramError(f"cannot read {what}: {self.error_}", primitive=self.error_.primitive)
        error.__cause__ = self.error_.__cause__
        return error

    def wait_node(self, node_id: int) -> None:
        """Compiled graphs: blocks until node `node_id` of this stream has run; raises if it failed."""
        with self._cond:
            self._cond.wait_for(lambda: node_id in self._done_nodes or self.error_ is not None)
            if node_id not in self._done_nodes:
                raise self._error_for(f"node %{node_id}")

    def wait_node_value(self, node_id: int, name: str) -> Any:
        """Compiled graphs: the value variable `name` got from node `node_id` (waits for it)."""
        key = (node_id, name)
        with self._cond:
            self._cond.wait_for(lambda: key in self.node_values or self.error_ is not None)
            if key not in self.node_values:
                raise self._error_for(f"variable {name!r} (node %{node_id})")
            return self.node_values[key]

    # --- worker ----------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._finish()
                self._queue.task_done()
                return
            try:
                self._run_item(*item)
            finally:
                self._queue.task_done()

    def _finish(self) -> None:
        with self._cond:
            self.is_finished = True
            self._cond.notify_all()

    def _run_item(self, expr: ir.Expr, node_id: int | None) -> None:
        self._current_node_id = node_id
        if self.error_ is None:
            try:
                self._execute(expr)
            except Exception as exc:
                self.fail(exc)
                return
        if node_id is not None and self.error_ is None:
            with self._cond:
                self._done_nodes.add(node_id)
                self._cond.notify_all()

    def fail(self, exc: BaseException, primitive: str | None = None) -> None:
        """Stores the first error of this stream and releases every waiter."""
        if primitive is None:
            primitive = self._current.describe() if self._current is not None else "program"
        if isinstance(exc, ProgramError):
            message = str(exc)
            cause = exc.__cause__ or exc
        else:
            message = f"{primitive} failed: {type(exc).__name__}: {exc}"
            cause = exc
        error = ProgramError(message, primitive=primitive)
        error.__cause__ = cause
        with self._cond:
            if self.error_ is None:
                self.error_ = error
                logger.warning("sglr program error: %s", message)
            self._cond.notify_all()

    # --- execution (worker thread) ------------------------------------------------------------------
    def _execute(self, expr: Any) -> None:
        if isinstance(expr, str):
            expr = ir.ConstantText(expr)
        if isinstance(expr, ir.ExprList):
            for child in expr.exprs:
                self._execute(child)
            return
        self._current = expr
        if isinstance(expr, ir.ConstantText):
            self._fill(expr.value)
        elif isinstance(expr, ir.Argument):
            self._fill_value(self.arguments[expr.name])
        elif isinstance(expr, ir.Gen):
            self._execute_gen(expr)
        elif isinstance(expr, ir.Select):
            self._execute_select(expr)
        elif isinstance(expr, ir.RoleBegin):
            self._role_begin(expr.role)
        elif isinstance(expr, ir.RoleEnd):
            self._role_end(expr.role)
        elif isinstance(expr, ir.Image):
            self._add_image(expr.source)
        elif isinstance(expr, ir.Video):
            self._add_video(expr.source, expr.num_frames)
        elif isinstance(expr, ir.VarScopeBegin):
            self._scope_starts[expr.name] = len(self.text_)
        elif isinstance(expr, ir.VarScopeEnd):
            start = self._scope_starts.pop(expr.name, None)
            if start is None:
                raise ValueError(f"var_scope({expr.name!r}) ended without a beginning")
            self._set_var(expr.name, self.text_[start:], None)
        elif isinstance(expr, ir.CommitLazy):
            if self.text_:
                self.backend.commit_lazy_operations(self)
        elif isinstance(expr, ir.ConcatenateAndAppend):
            for child in expr.states:
                child_executor = getattr(child, "stream_executor", child)
                self._fill(child_executor.checked_text()[child_executor.fork_start_text_pos :])
        elif self.graph_run is not None:
            self.graph_run.execute(self, expr)
        else:
            raise TypeError(f"{expr.describe()} can only run inside a compiled program")

    def _fill_value(self, value: Any) -> None:
        if isinstance(value, ir.Expr):
            self._execute(value)
        elif isinstance(value, str):
            self._fill(value)
        elif isinstance(value, (list, tuple, dict)):
            raise TypeError(
                f"cannot append a {type(value).__name__} to the prompt; index it or join it into a str"
            )
        else:
            self._fill(str(value))

    def _fill(self, value: str, prefix: bool = False) -> None:
        if not prefix and self._chat_speculation(self.cur_role):
            self._spec_parts.append(TextPart(value))
            return
        if self.speculated_text:
            self.speculated_text = consume(self.speculated_text, value)
        self._append_text(value)

    def _append_text(self, value: str) -> None:
        with self._cond:
            self.text_ += value
            self._cond.notify_all()

    def _set_var(self, name: str | None, value: Any, meta: Any, node_id: int | None = None) -> None:
        if name is None:
            return
        node_id = self._current_node_id if node_id is None else node_id
        with self._cond:
            if node_id is not None:
                self.node_values[(node_id, name)] = value
            self.variables[name] = value
            self.meta_info[name] = meta
            self._produced_vars.add(name)
            self._streaming_vars.discard(name)
            self._pending_vars[name] = max(self._pending_vars.get(name, 1) - 1, 0)
            self._cond.notify_all()
