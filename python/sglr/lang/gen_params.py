"""`GenParams`: the resolved options of one `gen`, run-level defaults with per-`gen` overrides.

A `gen` stores only the values the user set (`overrides`); the interpreter merges them into the
run-level `GenParams` with `GenParams.merged`, which validates the result. Besides sampling
values they hold what only the language knows (`dtype`, the logprob request keys, `extra`);
backends turn them into their request fields (`sglr.lang.backend.request_params`). The engine's
and the HTTP API's type is `sglr.sampling_params.SamplingParams`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sglr.errors import InvalidStructuralTagError
from sglr.lang.dtype_constraints import dtype_name, dtype_to_regex
from sglr.structural_tag import parse_structural_tag


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (str, int)):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class GenParams:
    """The options of one generation call (sampling names follow the native API)."""

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
    ebnf: str | None = None
    # SGLang's structural tag (JSON text): free text with constrained segments (docs/constraints.md).
    structural_tag: str | None = None
    # OpenAI tool calling (JSON text: the `tools` array and the `tool_choice` value); only
    # chat-completions backends carry them.
    tools: str | None = None
    tool_choice: str | None = None
    # The LoRA adapter to generate with, by name (None: the base model); a request-level field
    # of native requests, not a sampling parameter.
    lora_path: str | None = None
    # The scheduling priority (with the engine's priority scheduling; docs/scheduling.md), also a
    # request-level field. None: the engine's default.
    priority: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "stop", _as_tuple(self.stop))
        set_(self, "stop_token_ids", _as_tuple(self.stop_token_ids))
        set_(self, "stop_regex", _as_tuple(self.stop_regex))
        set_(self, "dtype", dtype_name(self.dtype))
        if isinstance(self.json_schema, dict):
            set_(self, "json_schema", json.dumps(self.json_schema))
        if isinstance(self.structural_tag, dict):
            set_(self, "structural_tag", json.dumps(self.structural_tag))
        if self.tools is not None and not isinstance(self.tools, str):
            set_(self, "tools", json.dumps(list(self.tools)))
        if (self.tool_choice is not None and not isinstance(self.tool_choice, str)) or self.tool_choice in (
            "auto",
            "none",
            "required",
        ):
            set_(self, "tool_choice", json.dumps(self.tool_choice))
        if self.max_new_tokens is not None and self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be at least 0, got {self.max_new_tokens}.")
        if self.min_new_tokens < 0 or (
            self.max_new_tokens is not None and self.min_new_tokens > self.max_new_tokens
        ):
            raise ValueError(f"min_new_tokens must be in [0, max_new_tokens], got {self.min_new_tokens}.")
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.lora_path is not None and (not isinstance(self.lora_path, str) or not self.lora_path):
            raise ValueError(f"lora_path must be an adapter's name, got {self.lora_path!r}.")
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
        ):
            raise ValueError(f"priority must be an integer, got {self.priority!r}.")
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
        if self.structural_tag is not None:
            try:
                parse_structural_tag(self.structural_tag)
            except InvalidStructuralTagError as exc:  # its message names the part
                raise ValueError(f"invalid structural_tag: {exc}") from exc
        self._check_tools()

    def _check_tools(self) -> None:
        tools = json.loads(self.tools) if self.tools is not None else None
        if tools is not None and (
            not isinstance(tools, list)
            or not all(isinstance(t, dict) and t.get("type") == "function" for t in tools)
        ):
            raise ValueError('tools must be a list of {"type": "function", "function": {...}} objects.')
        if self.tool_choice is not None:
            choice = json.loads(self.tool_choice)
            if choice not in ("auto", "none", "required") and not (
                isinstance(choice, dict) and isinstance(choice.get("function"), dict)
            ):
                raise ValueError(
                    'tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}.'
                )
            if not tools and choice != "none":
                raise ValueError("tool_choice needs tools.")

    @property
    def tools_list(self) -> list[dict[str, Any]] | None:
        return json.loads(self.tools) if self.tools is not None else None

    @property
    def tool_choice_value(self) -> str | dict[str, Any] | None:
        return json.loads(self.tool_choice) if self.tool_choice is not None else None

    def merged(self, **overrides: Any) -> GenParams:
        """A copy with the non-None `overrides` applied (validated again)."""
        values = {key: value for key, value in overrides.items() if value is not None}
        return dataclasses.replace(self, **values) if values else self

    def with_stop(self, extra_stop: tuple[str, ...]) -> GenParams:
        """A copy whose stop strings also include `extra_stop` (duplicates dropped, order kept)."""
        stops = tuple(dict.fromkeys(self.stop + tuple(extra_stop)))
        return self if stops == self.stop else dataclasses.replace(self, stop=stops)

    def regex_and_stop(self) -> tuple[str | None, tuple[str, ...]]:
        """The regex constraint and the stop strings to send: `dtype` lowered to its regex and
        extra stops here, so that no backend sees a dtype."""
        if self.dtype is None:
            return self.regex, self.stop
        regex, extra_stop = dtype_to_regex(self.dtype)
        return regex, tuple(dict.fromkeys(self.stop + extra_stop))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Options that `run()` and `gen` both take, under the same name.
_SHARED_OPTIONS = (
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
    "lora_path",
)

#: The names `gen` accepts, mapped to GenParams fields (`max_tokens` is `max_new_tokens`).
GEN_PARAM_FIELDS = {
    "max_tokens": "max_new_tokens",
    "min_tokens": "min_new_tokens",
    **{
        name: name
        for name in (
            *_SHARED_OPTIONS,
            "dtype",
            "regex",
            "json_schema",
            "ebnf",
            "structural_tag",
            "tools",
            "tool_choice",
        )
    },
}

#: The keyword arguments of `run()` / `run_batch()` that are run-level `GenParams` defaults
#: (`priority` is run-level only: one program's requests share it).
RUN_SAMPLING_KEYS = ("max_new_tokens", "min_new_tokens", *_SHARED_OPTIONS, "priority")


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    sampling = {key: kwargs[key] for key in RUN_SAMPLING_KEYS if key in kwargs}
    if "max_tokens" in kwargs and "max_new_tokens" not in kwargs:
        sampling["max_new_tokens"] = kwargs["max_tokens"]
    others = {k: v for k, v in kwargs.items() if k not in RUN_SAMPLING_KEYS and k != "max_tokens"}
    return sampling, others


def split_run_kwargs(kwargs: dict[str, Any]) -> tuple[GenParams, dict[str, Any]]:
    """Splits `run(**kwargs)` into the run-level `GenParams` and the program's arguments
    (`max_tokens` is accepted for `max_new_tokens`, as `gen` spells it)."""
    sampling, arguments = _split(kwargs)
    return GenParams(**sampling), arguments


def batch_run_params(kwargs: dict[str, Any]) -> GenParams:
    """The run-level `GenParams` of `run_batch(**kwargs)`, where every keyword must be one."""
    sampling, unknown = _split(kwargs)
    if unknown:
        raise TypeError(f"run_batch() got unexpected keyword arguments {list(unknown)}")
    return GenParams(**sampling)
