"""Sampling parameters of the language: run-level defaults and per-`gen` overrides.

A `gen` stores only the values the user set (`overrides`); the interpreter merges them into the
run-level `SamplingParams` with `SamplingParams.merged`, which validates the result.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
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


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (str, int)):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class SamplingParams:
    """Resolved sampling parameters of one generation call (names follow the native API)."""

    max_new_tokens: int = 128
    min_new_tokens: int = 0
    n: int = 1
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    stop_regex: tuple[str, ...] = ()
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    ignore_eos: bool = False
    return_logprob: bool | None = None
    logprob_start_len: int | None = None
    top_logprobs_num: int | None = None
    return_text_in_logprobs: bool | None = None
    json_schema: str | None = None
    dtype: str | None = None
    regex: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "stop", _as_tuple(self.stop))
        set_(self, "stop_token_ids", _as_tuple(self.stop_token_ids))
        set_(self, "stop_regex", _as_tuple(self.stop_regex))
        set_(self, "dtype", dtype_name(self.dtype))
        if isinstance(self.json_schema, dict):
            set_(self, "json_schema", json.dumps(self.json_schema))
        if self.max_new_tokens is not None and self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be at least 0, got {self.max_new_tokens}.")
        if self.min_new_tokens < 0 or (
            self.max_new_tokens is not None and self.min_new_tokens > self.max_new_tokens
        ):
            raise ValueError(f"min_new_tokens must be in [0, max_new_tokens], got {self.min_new_tokens}.")
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if not self.temperature >= 0 or self.temperature == float("inf"):
            raise ValueError(f"temperature must be a non-negative finite number, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.top_k != -1 and self.top_k < 1:
            raise ValueError(f"top_k must be -1 (disable) or at least 1, got {self.top_k}.")
        for penalty in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, penalty)
            if not -2 <= value <= 2:
                raise ValueError(f"{penalty} must be in [-2, 2], got {value}.")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex {self.regex!r}: {exc}") from exc
        if self.json_schema is not None:
            try:
                json.loads(self.json_schema)
            except json.JSONDecodeError as exc:
                raise ValueError(f"json_schema is not valid JSON: {exc}") from exc

    def merged(self, **overrides: Any) -> SamplingParams:
        """A copy with the non-None `overrides` applied (validated again)."""
        values = {key: value for key, value in overrides.items() if value is not None}
        return dataclasses.replace(self, **values) if values else self

    def with_stop(self, extra_stop: tuple[str, ...]) -> SamplingParams:
        """A copy whose stop strings also include `extra_stop` (duplicates dropped, order kept)."""
        stops = tuple(dict.fromkeys(self.stop + tuple(extra_stop)))
        return self if stops == self.stop else dataclasses.replace(self, stop=stops)

    def to_native_kwargs(self) -> dict[str, Any]:
        """The `sampling_params` object of a native `/generate` request.

        `dtype` is lowered to `regex` plus stop strings here, so a backend never sees it; the
        logprob fields are request-level keys and are left out.
        """
        regex, stop = self.regex, self.stop
        if self.dtype is not None:
            regex, extra_stop = dtype_to_regex(self.dtype)
            stop = tuple(dict.fromkeys(stop + extra_stop))
        out: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "min_new_tokens": self.min_new_tokens,
            "n": self.n,
            "stop": list(stop),
            "stop_token_ids": list(self.stop_token_ids),
            "stop_regex": list(self.stop_regex),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "ignore_eos": self.ignore_eos,
            "regex": regex,
            "json_schema": self.json_schema,
        }
        out.update(self.extra)
        return out

    def logprob_kwargs(self) -> dict[str, Any]:
        """The request-level logprob keys of a native request (only those that are set)."""
        keys = ("return_logprob", "logprob_start_len", "top_logprobs_num", "return_text_in_logprobs")
        return {key: getattr(self, key) for key in keys if getattr(self, key) is not None}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The names `gen` accepts, mapped to SamplingParams fields (`max_tokens` is `max_new_tokens`).
GEN_PARAM_FIELDS = {
    "max_tokens": "max_new_tokens",
    "min_tokens": "min_new_tokens",
    **{
        name: name
        for name in (
            "n",
            "stop",
            "stop_token_ids",
            "stop_regex",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "frequency_penalty",
            "presence_penalty",
            "ignore_eos",
            "return_logprob",
            "logprob_start_len",
            "top_logprobs_num",
            "return_text_in_logprobs",
            "dtype",
            "regex",
            "json_schema",
        )
    },
}
