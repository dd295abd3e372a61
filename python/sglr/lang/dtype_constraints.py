"""`gen(dtype=...)`: the regex and stop strings that make a generation parse as an int, float,
str or bool. The regex constants keep SGLang's names and values (programs import them from
`sglr.lang.ir`, as they do from SGLang's)."""

from __future__ import annotations

from typing import Any

REGEX_INT = r"[-+]?[0-9]+[ \n]*"
REGEX_FLOAT = r"[-+]?[0-9]*\.?[0-9]+[ \n]*"
REGEX_BOOL = r"(True|False)"
REGEX_STR = r"\"[\w\d\s]*\""

# dtype -> (regex, extra stop strings). Numbers end at whitespace, so a space or newline stops them.
_DTYPE_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "int": (REGEX_INT, (" ", "\n")),
    "float": (REGEX_FLOAT, (" ", "\n")),
    "str": (REGEX_STR, ()),
    "bool": (REGEX_BOOL, ()),
}


def dtype_name(dtype: Any) -> str | None:
    """Normalizes a `gen(dtype=...)` value (`int`, `"int"`, ...) to its name; None stays None."""
    if dtype is None:
        return None
    name = dtype.__name__ if isinstance(dtype, type) else str(dtype)
    if name not in _DTYPE_RULES:
        raise ValueError(f"invalid dtype {dtype!r}: expected one of int, float, str, bool")
    return name


def dtype_to_regex(dtype: Any) -> tuple[str, tuple[str, ...]]:
    """The regex constraint and the extra stop strings that implement `dtype`."""
    name = dtype_name(dtype)
    if name is None:
        raise ValueError("dtype_to_regex needs a dtype")
    return _DTYPE_RULES[name]
