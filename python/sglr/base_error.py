"""`SglrError`, the root of sglr's error classes (apart from `sglr.errors` so that its topic
modules, such as `sglr.constraint_errors`, can subclass it without an import cycle)."""

from __future__ import annotations


class SglrError(Exception):
    """Base class of every error sglr raises on purpose."""
