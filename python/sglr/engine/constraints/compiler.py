"""`ConstraintCompiler`: `regex` / `json_schema` sampling params -> a fresh `ConstraintState`.

Compiles against the engine's vocabulary (built once, on first use) through the shared
`ConstraintCache`, so one pattern is compiled once however many requests use it. A pattern
that does not compile raises `InvalidRequestError` naming the field.
"""

from __future__ import annotations

import threading
from typing import Any

from sglr.engine.constraints.cache import ConstraintCache
from sglr.engine.constraints.state import ConstraintState
from sglr.engine.constraints.vocab import vocabulary_from_hf
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import ConstraintError, InvalidRequestError
from sglr.sampling_params import SamplingParams


class ConstraintCompiler:
    def __init__(self, tokenizer: EngineTokenizer) -> None:
        self.tokenizer = tokenizer
        self.cache = ConstraintCache()
        self._vocabulary: Any = None
        self._vocab_lock = threading.Lock()

    @property
    def num_hits(self) -> int:
        return self.cache.num_hits

    def vocabulary(self) -> Any:
        with self._vocab_lock:
            if self._vocabulary is None:
                self._vocabulary = vocabulary_from_hf(self.tokenizer.hf, sorted(self.tokenizer.eos_token_ids))
            return self._vocabulary

    def compile(self, params: SamplingParams) -> ConstraintState:
        vocabulary = self.vocabulary()
        field = "regex" if params.regex is not None else "json_schema"
        try:
            if params.regex is not None:
                fsm = self.cache.regex(params.regex, vocabulary)
            else:
                fsm = self.cache.json_schema(params.json_schema, vocabulary)
        except ConstraintError as exc:
            raise InvalidRequestError(f"invalid {field}: {exc}", param=f"sampling_params.{field}") from exc
        return ConstraintState(fsm)
