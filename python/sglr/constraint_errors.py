"""The constraint errors (regex, JSON schema, EBNF, structural tag, FSM and mask misuse), raised
by `sglr._core` and the constraint layer; `sglr.errors` re-exports them with every other class."""

from __future__ import annotations

from sglr.base_error import SglrError


class ConstraintError(SglrError):
    """A regex / JSON-schema output constraint that cannot be compiled or used."""


class InvalidRegexError(ConstraintError, ValueError):
    """The constraint regex does not parse."""


class UnsupportedRegexError(ConstraintError, ValueError):
    """The regex uses a feature a finite automaton cannot express (look-around, backreference,
    Unicode word boundary, ...)."""


class ConstraintTooLargeError(ConstraintError, ValueError):
    """The constraint's automaton exceeds a size limit (a huge bounded repetition, say)."""


class EmptyConstraintError(ConstraintError, ValueError):
    """The constraint matches no string at all."""


class InvalidSchemaError(ConstraintError, ValueError):
    """The JSON schema is not valid JSON or not a valid schema."""


class UnsupportedSchemaError(ConstraintError, ValueError):
    """The JSON schema uses a keyword that cannot be enforced; `keyword` and `path` say which
    and where. Refused up front so that no invalid output is ever admitted."""

    def __init__(self, message: str, keyword: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.keyword = keyword
        self.path = path


class GrammarSyntaxError(ConstraintError, ValueError):
    """EBNF grammar text that does not parse (or names an undefined rule); `line` and `column`
    (1-based) say where when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class InvalidStructuralTagError(ConstraintError, ValueError):
    """A structural tag that is malformed (a missing begin, a trigger no begin starts with, a
    schema that does not compile, ...); `field` names the part (`structures[0].begin`)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class VocabularyError(ConstraintError, ValueError):
    """A malformed token table, or FSMs over different vocabularies mixed in one batch."""


class UnknownStateError(ConstraintError, ValueError):
    """A state id that the FSM never issued."""


class TokenNotAllowedError(ConstraintError, ValueError):
    """A token the constraint forbids in the current state (or an id outside the vocabulary)."""


class BitmaskShapeError(ConstraintError, ValueError):
    """A token bitmask buffer too small for the vocabulary or the batch."""
