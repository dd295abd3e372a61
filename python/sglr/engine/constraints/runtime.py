"""`Constraints`: everything the scheduler loop does with output constraints, behind one interface.

- `start_compile(req, on_ready)`: compiles the request's `regex` / `json_schema` / `ebnf` (behind a
  `ReasoningGate` when the request reasons first) on a worker thread (one slow pattern never stalls the loop) and calls `on_ready(req, error)`; a pattern
  that does not compile fails only its own request, with an `InvalidRequestError` naming the
  field.
- `token_masks(reqs, vocab_size)`: the allowed-token mask of a sampling step (see `masker`).
- `accept(req, token_id)`: advances the request's FSM by a sampled token and returns the tokens
  to append (the sampled one, plus the forced run when jump-forward applies), or None when the
  token breaks the constraint.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from sglr.engine.constraints.compiler import ConstraintCompiler
from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.constraints.jump_forward import jump_forward
from sglr.engine.constraints.masker import build_token_masks
from sglr.engine.constraints.reasoning_gate import ReasoningGate
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import InvalidRequestError

logger = logging.getLogger("sglr.engine")

OnReady = Callable[[Any, InvalidRequestError | None], None]


class Constraints:
    def __init__(
        self, tokenizer: EngineTokenizer, use_jump_forward: bool = True, json_schema_any_order: bool = False
    ) -> None:
        self.tokenizer = tokenizer
        self.use_jump_forward = use_jump_forward
        self.json_schema_any_order = json_schema_any_order
        self._compiler: ConstraintCompiler | None = None  # built on the first constrained request
        self._compiler_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sglr-compile")

    @classmethod
    def for_engine(cls, tokenizer: EngineTokenizer, config: Any) -> Constraints:
        """As an `EngineConfig` says: jump-forward unless disabled, objects' property order."""
        return cls(tokenizer, not config.disable_jump_forward, config.json_schema_any_order)

    @property
    def num_cache_hits(self) -> int:
        return self._compiler.num_hits if self._compiler is not None else 0

    def compiler(self) -> ConstraintCompiler:
        with self._compiler_lock:
            if self._compiler is None:
                self._compiler = ConstraintCompiler(self.tokenizer, self.json_schema_any_order)
            return self._compiler

    def start_compile(self, req: Any, on_ready: OnReady) -> None:
        self._pool.submit(self._compile, req, on_ready)

    def _compile(self, req: Any, on_ready: OnReady) -> None:
        error = None
        try:
            req.constraint = self.compiler().compile(req.params)
            close_tag = req.params.reasoning_close_tag
            if close_tag is not None:
                open_tag = req.params.reasoning_open_tag
                req.constraint = ReasoningGate(
                    req.constraint,
                    self._tag_ids(close_tag),
                    None if open_tag is None else self._tag_ids(open_tag),
                )
        except InvalidRequestError as exc:
            error = exc
        except Exception as exc:  # never let a compile failure hang the request
            logger.exception("constraint compilation failed")
            error = InvalidRequestError(f"constraint error: {exc}")
        on_ready(req, error)

    def _tag_ids(self, tag: str) -> list[int]:
        return list(self.tokenizer.hf.encode(tag, add_special_tokens=False))

    def token_masks(self, reqs: Sequence[Any], vocab_size: int) -> np.ndarray | None:
        return build_token_masks(reqs, vocab_size)

    def accept(self, req: Any, token_id: int) -> list[int] | None:
        constraint = req.constraint
        if constraint is None:
            return [token_id]
        if isinstance(constraint, ReasoningGate):
            started = constraint.take(token_id)
            if started is None:
                return None
            if started:
                req.constraint = constraint.inner
            return [token_id]
        if not constraint.advance(token_id):
            return None
        # Jump-forward tokens have no sampled logprobs, so requests that want them step.
        if self.use_jump_forward and req.logprobs is None:
            if isinstance(constraint, GrammarConstraintState):
                return constraint.jump_forward(token_id, self.tokenizer.hf) or [token_id]
            compiler = self.compiler()
            forced = jump_forward(constraint, token_id, compiler.vocabulary(), self.tokenizer.hf)
            if forced:
                return forced
        return [token_id]

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
