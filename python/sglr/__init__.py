"""sglr: a fast, programmable LLM system (an LM-program DSL co-designed with a serving runtime).

This module exports the public API only; importing it has no side effects.
"""

from sglr.errors import (
    InvariantError,
    LengthMismatchError,
    RadixError,
    SglrError,
    StaleNodeError,
    UnknownNodeError,
    UnlockError,
)

__all__ = [
    "InvariantError",
    "LengthMismatchError",
    "RadixError",
    "SglrError",
    "StaleNodeError",
    "UnknownNodeError",
    "UnlockError",
]
__version__ = "0.1.0"
