"""Whether a text is the start of a JSON document (what a constrained generation cut short by its
token limit must be): a small recursive-descent reader that reports reaching the end inside a
value as a prefix, and anything JSON forbids as not one."""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NUMBER_CHARS = re.compile(r"[-+.eE0-9]+")


class _End(Exception):
    """The text ended inside a value."""


def is_json_prefix(text: str) -> bool:
    """True for a complete JSON value (with surrounding whitespace) or any prefix of one."""
    try:
        end = _value(text, 0)
    except _End:
        return True
    except ValueError:
        return False
    return text[end:].strip() == ""


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    if i == len(text):
        raise _End
    return i


def _value(text: str, i: int) -> int:
    i = _skip_space(text, i)
    c = text[i]
    if c in "{[":
        return _container(text, i + 1, "}" if c == "{" else "]")
    if c == '"':
        return _string(text, i + 1)
    for word in ("true", "false", "null"):
        if text.startswith(word, i):
            return i + len(word)
        if word.startswith(text[i:]):
            raise _End
    run = _NUMBER_CHARS.match(text, i)
    if run is None:
        raise ValueError(f"no value at {i}")
    if run.end() == len(text):
        raise _End  # a number may go on
    if not _NUMBER.fullmatch(run.group()):
        raise ValueError(f"bad number at {i}")
    return run.end()


def _string(text: str, i: int) -> int:
    while i < len(text):
        c = text[i]
        if c == '"':
            return i + 1
        if c < " ":
            raise ValueError(f"control character in a string at {i}")
        if c == "\\":
            escape = text[i + 1 : i + 2]
            if escape == "u":
                digits = text[i + 2 : i + 6]
                if not re.fullmatch(r"[0-9a-fA-F]*", digits):
                    raise ValueError(f"bad \\u escape at {i}")
                if len(digits) < 4:
                    raise _End
                i += 6
                continue
            if escape and escape not in '"\\/bfnrt':
                raise ValueError(f"bad escape at {i}")
            i += 2
            continue
        i += 1
    raise _End


def _container(text: str, i: int, close: str) -> int:
    i = _skip_space(text, i)
    if text[i] == close:
        return i + 1
    while True:
        if close == "}":
            i = _skip_space(text, i)
            if text[i] != '"':
                raise ValueError(f"expected a key at {i}")
            i = _skip_space(text, _string(text, i + 1))
            if text[i] != ":":
                raise ValueError(f"expected ':' at {i}")
            i += 1
        i = _skip_space(text, _value(text, i))
        if text[i] == close:
            return i + 1
        if text[i] != ",":
            raise ValueError(f"expected ',' or {close!r} at {i}")
        i += 1
