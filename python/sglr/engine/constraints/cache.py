"""Compile cache: one immutable `TokenFsm` or `GrammarConstraint` per (constraint, options,
vocabulary): kinds `regex`, `json_schema` (FSM or grammar), `ebnf` and `structural_tag`."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sglr._core import GrammarConstraint, TokenFsm, Vocabulary
from sglr.structural_tag import StructuralTag


@dataclass(frozen=True)
class JsonSchemaConfig:
    """How a JSON schema becomes a regex.

    whitespace_pattern: regex for whitespace between JSON tokens. `[ ]?` (default) accepts
        compact JSON and Python's `json.dumps` layout without letting a model loop on spaces.
    additional_properties: what objects allow when the schema does not say: False (default)
        only declared properties, True anything else as well (JSON Schema's own default).
    implied_types: the types of a schema without `type`: True (default) those its keywords
        imply (`properties` means an object, `minLength` a string), as generation wants;
        False the specification's reading, where such keywords constrain only values of their
        own type and every other type stays free.
    max_any_depth: nesting allowed inside unconstrained values (`{}`, free members), which the
        FSM path unrolls; None admits any depth as the schema says: the FSM path then refuses
        such schemas and the grammar path takes them (exact, slower masks).
    max_recursion_depth: how often a recursive `$ref` unfolds before the branch is cut.
    max_regex_len: longest schema regex the FSM path determinizes eagerly (None: the core's
        default, 4 KiB, a few ms of construction); longer ones, free values unrolled
        `max_any_depth` levels among them (tens of KiB, 60 to 130 ms), go to the grammar path.
    properties_any_order: an object's declared properties in any order (each at most once, the
        required ones present), not only the schema's: the FSM path spells out the orders of up
        to 3 properties, the grammar path tracks which were written (refused past 8192 sets).
    """

    whitespace_pattern: str = "[ ]?"
    additional_properties: bool = False
    implied_types: bool = True
    max_any_depth: int | None = 3
    max_recursion_depth: int = 3
    max_regex_len: int | None = None
    properties_any_order: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.whitespace_pattern, str):
            raise TypeError("whitespace_pattern must be a str")
        if (self.max_any_depth is not None and self.max_any_depth < 0) or self.max_recursion_depth < 0:
            raise ValueError("max_any_depth and max_recursion_depth must be >= 0")


class _Slot:
    """One cache entry; the first caller compiles, concurrent callers wait for it."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.fsm: Any = None  # a TokenFsm or a GrammarConstraint
        self.error: BaseException | None = None


class ConstraintCache:
    """Thread-safe LRU of compiled constraints keyed by (kind, text, options, vocabulary).

    Compilation runs outside the cache lock with the GIL released, so different constraints
    compile in parallel and one constraint is never compiled twice at once. Compile errors
    (`sglr.errors.ConstraintError` subclasses) are raised to every waiting caller and not
    cached.
    """

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._slots: OrderedDict[tuple[Any, ...], _Slot] = OrderedDict()
        self.num_hits = 0
        self.num_misses = 0

    def regex(self, pattern: str, vocabulary: Vocabulary) -> TokenFsm:
        """The FSM for `pattern` (matched against the whole output)."""
        key = ("regex", pattern, vocabulary.fingerprint)
        return self._get(key, lambda: TokenFsm.from_regex(pattern, vocabulary))

    def json_schema(
        self,
        schema: str | dict[str, Any] | bool,
        vocabulary: Vocabulary,
        config: JsonSchemaConfig | None = None,
    ) -> TokenFsm:
        """The FSM for the JSON documents `schema` admits (a dict is serialised first)."""
        config = config or JsonSchemaConfig()
        text = schema if isinstance(schema, str) else json.dumps(schema)
        key = ("json_schema", text, config, vocabulary.fingerprint)
        return self._get(
            key,
            lambda: TokenFsm.from_json_schema(
                text,
                vocabulary,
                whitespace_pattern=config.whitespace_pattern,
                additional_properties=config.additional_properties,
                implied_types=config.implied_types,
                max_any_depth=config.max_any_depth,
                max_recursion_depth=config.max_recursion_depth,
                max_regex_len=config.max_regex_len,
                properties_any_order=config.properties_any_order,
            ),
        )

    def ebnf(self, text: str, vocabulary: Vocabulary) -> GrammarConstraint:
        """The grammar constraint for EBNF / GBNF text (start rule `root`)."""
        key = ("ebnf", text, vocabulary.fingerprint)
        return self._get(key, lambda: GrammarConstraint.from_ebnf(text, vocabulary))

    def json_schema_grammar(
        self, schema: str, vocabulary: Vocabulary, config: JsonSchemaConfig | None = None
    ) -> GrammarConstraint:
        """The grammar constraint for a JSON schema (recursion to any depth)."""
        config = config or JsonSchemaConfig()
        key = ("json_schema_grammar", schema, config, vocabulary.fingerprint)
        return self._get(
            key,
            lambda: GrammarConstraint.from_json_schema(
                schema,
                vocabulary,
                whitespace_pattern=config.whitespace_pattern,
                additional_properties=config.additional_properties,
                implied_types=config.implied_types,
                properties_any_order=config.properties_any_order,
            ),
        )

    def structural_tag(
        self, tag: StructuralTag, vocabulary: Vocabulary, config: JsonSchemaConfig | None = None
    ) -> GrammarConstraint:
        """The grammar constraint for a structural tag (its schemas read under `config`)."""
        config = config or JsonSchemaConfig()
        key = ("structural_tag", tag, config, vocabulary.fingerprint)
        return self._get(
            key,
            lambda: GrammarConstraint.from_structural_tag(
                tag.core_structures(),
                list(tag.triggers),
                vocabulary,
                whitespace_pattern=config.whitespace_pattern,
                additional_properties=config.additional_properties,
                implied_types=config.implied_types,
            ),
        )

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for slot in self._slots.values() if slot.fsm is not None)

    def clear(self) -> None:
        with self._lock:
            self._slots.clear()

    def _get(self, key: tuple[Any, ...], compile_fn: Any) -> Any:
        with self._lock:
            slot = self._slots.get(key)
            owner = slot is None
            if owner:
                slot = _Slot()
                self._slots[key] = slot
                self.num_misses += 1
            else:
                self._slots.move_to_end(key)
                self.num_hits += 1
        assert slot is not None
        if not owner:
            slot.ready.wait()
            if slot.error is not None:
                raise slot.error
            assert slot.fsm is not None
            return slot.fsm
        try:
            slot.fsm = compile_fn()
        except BaseException as error:
            slot.error = error
            with self._lock:
                if self._slots.get(key) is slot:
                    del self._slots[key]
            raise
        finally:
            slot.ready.set()
        with self._lock:
            while len(self._slots) > self.max_entries:
                self._slots.popitem(last=False)
        return slot.fsm
