"""Structural tags, SGLang's `structural_tag` constraint, read from the wire.

A tag is `{"type": "structural_tag", "structures": [{"begin", "schema", "end"}, ...],
"triggers": [...]}` (the OpenAI `response_format` form; natively the same object as JSON text,
`type` optional): output is free text until a trigger appears, then one structure's `begin`
(which starts with that trigger), a JSON value valid under its `schema`, and its `end`; then
free text again. xgrammar's newer form (`{"type": "structural_tag", "format": {...}}`) is
refused by name. This module checks only the shape (fields, types); how triggers and begins
fit together, and the schemas, are checked where the grammar is built (rust/grammar), whose
errors name the field as these do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sglr.errors import InvalidStructuralTagError

_TOP_KEYS = frozenset({"type", "structures", "triggers"})
_STRUCTURE_KEYS = frozenset({"begin", "schema", "end"})


@dataclass(frozen=True)
class TagStructure:
    begin: str
    schema: str  # JSON text
    end: str


@dataclass(frozen=True)
class StructuralTag:
    structures: tuple[TagStructure, ...]
    triggers: tuple[str, ...]

    def core_structures(self) -> list[tuple[str, str, str]]:
        """The `(begin, schema, end)` triples `GrammarConstraint.from_structural_tag` takes."""
        return [(s.begin, s.schema, s.end) for s in self.structures]


def parse_structural_tag(value: str | dict[str, Any]) -> StructuralTag:
    """Reads a tag from JSON text or a decoded object; raises `InvalidStructuralTagError` whose
    `field` is the path inside the tag (`structures[0].begin`), None for the tag itself."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InvalidStructuralTagError(f"structural_tag is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidStructuralTagError("structural_tag must be a JSON object")
    if "format" in value:
        raise InvalidStructuralTagError(
            "the `format` form of structural_tag is not supported; give `structures` and `triggers`",
            field="format",
        )
    for key in value:
        if key not in _TOP_KEYS:
            raise InvalidStructuralTagError(
                f"unknown field `{key}` in structural_tag, expected one of {', '.join(sorted(_TOP_KEYS))}",
                field=key,
            )
    if value.get("type", "structural_tag") != "structural_tag":
        raise InvalidStructuralTagError(f"type must be 'structural_tag', got {value['type']!r}", field="type")
    structures = _list(value, "structures")
    triggers = _list(value, "triggers")
    for index, trigger in enumerate(triggers):
        if not isinstance(trigger, str):
            raise InvalidStructuralTagError("a trigger must be a string", field=f"triggers[{index}]")
    return StructuralTag(
        structures=tuple(_structure(raw, f"structures[{index}]") for index, raw in enumerate(structures)),
        triggers=tuple(triggers),
    )


def _list(value: dict[str, Any], key: str) -> list[Any]:
    if key not in value:
        raise InvalidStructuralTagError(f"{key} is required", field=key)
    items = value[key]
    if not isinstance(items, list):
        raise InvalidStructuralTagError(f"{key} must be a list", field=key)
    return items


def _structure(raw: Any, field: str) -> TagStructure:
    if not isinstance(raw, dict):
        raise InvalidStructuralTagError(f"{field} must be an object with begin, schema and end", field=field)
    for key in raw:
        if key not in _STRUCTURE_KEYS:
            raise InvalidStructuralTagError(
                f"unknown field `{key}` in {field}, expected begin, schema and end", field=f"{field}.{key}"
            )
    for key in ("begin", "end"):
        if key not in raw:
            raise InvalidStructuralTagError(f"{field}.{key} is required", field=f"{field}.{key}")
        if not isinstance(raw[key], str):
            raise InvalidStructuralTagError(f"{field}.{key} must be a string", field=f"{field}.{key}")
    if "schema" not in raw:
        raise InvalidStructuralTagError(f"{field}.schema is required", field=f"{field}.schema")
    schema = raw["schema"]
    if not isinstance(schema, (dict, bool)):
        raise InvalidStructuralTagError(
            f"{field}.schema must be a JSON schema (an object)", field=f"{field}.schema"
        )
    return TagStructure(begin=raw["begin"], schema=json.dumps(schema), end=raw["end"])
