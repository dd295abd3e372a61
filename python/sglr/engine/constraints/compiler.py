"""`ConstraintCompiler`: `regex` / `json_schema` / `ebnf` / `structural_tag` sampling params -> a
fresh constraint state.

`regex` and non-recursive schemas become a token FSM (`ConstraintState`); `ebnf`, schemas with
a `$ref` cycle, schemas whose FSM would be too large and schemas using a keyword no regex can
say (`patternProperties`, `minProperties`, ...) become a grammar (`GrammarConstraintState`);
when the grammar path refuses too, its error (naming the keyword) is the request's. A
`structural_tag` is always a grammar (free text around JSON segments).

A schema's objects take their declared properties in the schema's order, or in any order when
the request's `json_schema_any_order` says so (None: the engine's default).

Compiles against the engine's vocabulary (built once, on first use) through the shared
`ConstraintCache`, so one pattern is compiled once however many requests use it. A pattern
that does not compile raises `InvalidRequestError` naming the field (inside a structural tag,
the part: `sampling_params.structural_tag.structures[0].schema`).
"""

from __future__ import annotations

import threading
from typing import Any

from sglr._core import json_schema_is_recursive
from sglr.engine.constraints.cache import ConstraintCache, JsonSchemaConfig
from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.constraints.state import ConstraintState
from sglr.engine.constraints.vocab import vocabulary_from_hf
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import (
    ConstraintError,
    ConstraintTooLargeError,
    InvalidRequestError,
    InvalidStructuralTagError,
    UnsupportedSchemaError,
)
from sglr.sampling_params import SamplingParams
from sglr.structural_tag import parse_structural_tag


class ConstraintCompiler:
    def __init__(self, tokenizer: EngineTokenizer, json_schema_any_order: bool = False) -> None:
        self.tokenizer = tokenizer
        self.json_schema_any_order = json_schema_any_order
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

    def compile(self, params: SamplingParams) -> ConstraintState | GrammarConstraintState:
        vocabulary = self.vocabulary()
        if params.regex is not None:
            field = "regex"
        elif params.ebnf is not None:
            field = "ebnf"
        elif params.structural_tag is not None:
            field = "structural_tag"
        else:
            field = "json_schema"
        try:
            if params.regex is not None:
                return ConstraintState(self.cache.regex(params.regex, vocabulary))
            if params.ebnf is not None:
                return GrammarConstraintState(self.cache.ebnf(params.ebnf, vocabulary))
            if params.structural_tag is not None:
                tag = parse_structural_tag(params.structural_tag)
                return GrammarConstraintState(self.cache.structural_tag(tag, vocabulary))
            any_order = params.json_schema_any_order
            config = JsonSchemaConfig(
                properties_any_order=self.json_schema_any_order if any_order is None else any_order
            )
            return self._json_schema(params.json_schema, vocabulary, config)
        except InvalidStructuralTagError as exc:
            where = f"structural_tag.{exc.field}" if exc.field else "structural_tag"
            raise InvalidRequestError(
                f"invalid structural_tag: {exc}", param=f"sampling_params.{where}"
            ) from exc
        except ConstraintError as exc:
            raise InvalidRequestError(f"invalid {field}: {exc}", param=f"sampling_params.{field}") from exc

    def _json_schema(
        self, schema: Any, vocabulary: Any, config: JsonSchemaConfig
    ) -> ConstraintState | GrammarConstraintState:
        if json_schema_is_recursive(schema):
            return GrammarConstraintState(self.cache.json_schema_grammar(schema, vocabulary, config))
        try:
            return ConstraintState(self.cache.json_schema(schema, vocabulary, config))
        except (ConstraintTooLargeError, UnsupportedSchemaError):
            # The grammar path holds what one regex cannot (any order past a few properties
            # among them); a refusal there names the keyword.
            return GrammarConstraintState(self.cache.json_schema_grammar(schema, vocabulary, config))
