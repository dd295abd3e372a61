"""`SamplingParams`: how one request samples, validated once at the door.

Field names, defaults and error messages follow SGLang's native API so existing clients and
programs work unchanged. Unknown keys are rejected (`from_dict`), `null` means the default,
`temperature` below 1e-6 means greedy, and `top_k=-1` means no top-k cut.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from sglr.errors import (
    InvalidRequestError,
    InvalidSamplingParamsError,
    InvalidStructuralTagError,
    SamplingLimitError,
)

# Compiling a grammar is linear in its text (and the parser is bounded); each new token is
# checked against every stop string and regex, and the logit bias is applied at every step.
from sglr.limits import (
    MAX_EBNF_BYTES,
    MAX_LOGIT_BIAS_ENTRIES,
    MAX_STOP_REGEX_BYTES,
    MAX_STOP_STRING_CHARS,
    MAX_STOP_STRINGS,
)
from sglr.sampling_wire import NULLABLE_FIELDS, coerce_field
from sglr.structural_tag import parse_structural_tag

TOP_K_ALL = 1 << 30
# Below this, a temperature means greedy decoding (as in SGLang and vLLM).
GREEDY_TEMPERATURE = 1e-6
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# A reasoning tag is a marker such as "</think>", matched token by token.
MAX_REASONING_TAG_CHARS = 64


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int | None = 128
    min_new_tokens: int = 0
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    stop_regex: tuple[str, ...] = ()
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = TOP_K_ALL
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    n: int = 1
    json_schema: str | None = None
    regex: str | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    logit_bias: dict[int, float] | None = field(default=None, hash=False)
    seed: int | None = None
    # An EBNF / GBNF grammar the whole output must match (SGLang clients send it empty when
    # unused, which means no grammar).
    ebnf: str | None = None
    # sglr extensions: with a constraint, the output may first reason freely up to
    # `reasoning_close_tag` (e.g. "</think>"), the constraint applying from there on; with
    # `reasoning_open_tag` too, only a reply that opens with it reasons first (the chat server
    # sets both from `--reasoning-parser`).
    reasoning_open_tag: str | None = None
    reasoning_close_tag: str | None = None
    # A structural tag (JSON text, `sglr.structural_tag`): free text whose triggers open
    # segments of schema-constrained JSON.
    structural_tag: str | None = None
    # sglr's extension: a JSON schema's objects may list their declared properties in any order
    # (each at most once); None: the engine's `json_schema_any_order` setting.
    json_schema_any_order: bool | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise in place before validating
        if isinstance(self.stop, str):
            set_(self, "stop", (self.stop,))
        else:
            set_(self, "stop", tuple(self.stop or ()))
        if isinstance(self.stop_regex, str):
            set_(self, "stop_regex", (self.stop_regex,))
        else:
            set_(self, "stop_regex", tuple(self.stop_regex or ()))
        set_(self, "stop_token_ids", frozenset(t for t in (self.stop_token_ids or ()) if t is not None))
        if self.top_k == -1:
            set_(self, "top_k", TOP_K_ALL)
        if self.json_schema == "":
            set_(self, "json_schema", None)
        if self.regex == "":
            set_(self, "regex", None)
        if self.ebnf == "":
            set_(self, "ebnf", None)
        if self.structural_tag == "":
            set_(self, "structural_tag", None)
        if isinstance(self.temperature, (int, float)) and 0 <= self.temperature < GREEDY_TEMPERATURE:
            set_(self, "temperature", 1.0)
            set_(self, "top_k", 1)
        self._validate()

    @property
    def is_greedy(self) -> bool:
        return self.top_k == 1

    @property
    def has_penalty(self) -> bool:
        return self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0

    @property
    def has_constraint(self) -> bool:
        return any(c is not None for c in (self.json_schema, self.regex, self.ebnf, self.structural_tag))

    def _validate(self) -> None:
        def fail(message: str, name: str) -> None:
            raise InvalidSamplingParamsError(message, param=f"sampling_params.{name}")

        def over(message: str, name: str, limit: str) -> None:
            raise SamplingLimitError(message, param=f"sampling_params.{name}", limit=limit)

        if (
            not isinstance(self.temperature, (int, float))
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            fail(f"temperature must be a non-negative finite number, got {self.temperature}.", "temperature")
        if not 0 < self.top_p <= 1:
            fail(f"top_p must be in (0, 1], got {self.top_p}.", "top_p")
        if not 0 <= self.min_p <= 1:
            fail(f"min_p must be in [0, 1], got {self.min_p}.", "min_p")
        if self.top_k < 1:
            fail(f"top_k must be -1 (disable) or at least 1, got {self.top_k}.", "top_k")
        if not -2 <= self.frequency_penalty <= 2:
            fail(f"frequency_penalty must be in [-2, 2], got {self.frequency_penalty}.", "frequency_penalty")
        if not -2 <= self.presence_penalty <= 2:
            fail(f"presence_penalty must be in [-2, 2], got {self.presence_penalty}.", "presence_penalty")
        if not 0 < self.repetition_penalty <= 2:
            fail(
                f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {self.repetition_penalty}.",
                "repetition_penalty",
            )
        if self.max_new_tokens is not None and self.max_new_tokens < 0:
            fail(f"max_new_tokens must be at least 0, got {self.max_new_tokens}.", "max_new_tokens")
        if self.min_new_tokens < 0:
            fail(
                f"min_new_tokens must be in [0, max_new_tokens], got {self.min_new_tokens}.", "min_new_tokens"
            )
        if self.max_new_tokens is not None and self.min_new_tokens > self.max_new_tokens:
            fail(
                f"min_new_tokens must be in [0, max_new_tokens({self.max_new_tokens})], got {self.min_new_tokens}.",
                "min_new_tokens",
            )
        if self.n < 1:
            fail(f"n must be at least 1, got {self.n}.", "n")
        if len(self.stop) > MAX_STOP_STRINGS:
            over(
                f"at most {MAX_STOP_STRINGS} stop strings are allowed, got {len(self.stop)}",
                "stop",
                "max_stop_strings",
            )
        if any(not isinstance(s, str) or not s for s in self.stop):
            fail("stop strings must be non-empty strings.", "stop")
        longest = max(map(len, self.stop), default=0)
        if longest > MAX_STOP_STRING_CHARS:
            over(
                f"a stop string is {longest} characters, over the {MAX_STOP_STRING_CHARS}-character limit",
                "stop",
                "max_stop_string_chars",
            )
        if len(self.stop_regex) > MAX_STOP_STRINGS:
            over(
                f"at most {MAX_STOP_STRINGS} stop_regex patterns are allowed, got {len(self.stop_regex)}",
                "stop_regex",
                "max_stop_strings",
            )
        for pattern in self.stop_regex:
            if not isinstance(pattern, str) or not pattern:
                fail("stop_regex patterns must be non-empty strings.", "stop_regex")
            num_bytes = len(pattern.encode("utf-8"))
            if num_bytes > MAX_STOP_REGEX_BYTES:
                over(
                    f"stop_regex is {num_bytes} bytes, over the {MAX_STOP_REGEX_BYTES}-byte limit",
                    "stop_regex",
                    "max_stop_regex_bytes",
                )
            try:
                re.compile(pattern)
            except re.error as exc:
                fail(f"invalid stop_regex {pattern!r}: {exc}", "stop_regex")
        if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
            fail("stop_token_ids must be non-negative integers.", "stop_token_ids")
        if self.ebnf is not None and len(self.ebnf.encode()) > MAX_EBNF_BYTES:
            over(f"ebnf is over the {MAX_EBNF_BYTES}-byte limit", "ebnf", "max_ebnf_bytes")
        if self.logit_bias is not None and len(self.logit_bias) > MAX_LOGIT_BIAS_ENTRIES:
            over(
                f"logit_bias has {len(self.logit_bias)} entries, over the limit of {MAX_LOGIT_BIAS_ENTRIES}",
                "logit_bias",
                "max_logit_bias_entries",
            )
        if self.json_schema is not None:
            try:
                json.loads(self.json_schema)
            except ValueError as exc:
                fail(f"json_schema is not valid JSON: {exc}", "json_schema")
        if self.structural_tag is not None:
            if len(self.structural_tag.encode()) > MAX_EBNF_BYTES:
                over(
                    f"structural_tag is over the {MAX_EBNF_BYTES}-byte limit",
                    "structural_tag",
                    "max_ebnf_bytes",
                )
            try:
                parse_structural_tag(self.structural_tag)
            except InvalidStructuralTagError as exc:
                where = f"structural_tag.{exc.field}" if exc.field else "structural_tag"
                fail(f"invalid structural_tag: {exc}", where)
        grammars = (self.json_schema, self.regex, self.ebnf, self.structural_tag)
        if sum(c is not None for c in grammars) > 1:
            fail("Only one of json_schema, regex, ebnf, or structural_tag can be set.", "regex")
        for name in ("reasoning_open_tag", "reasoning_close_tag"):
            tag = getattr(self, name)
            if tag is not None and not 0 < len(tag) <= MAX_REASONING_TAG_CHARS:
                fail(f"{name} must be 1 to {MAX_REASONING_TAG_CHARS} characters.", name)
        if self.reasoning_open_tag is not None and self.reasoning_close_tag is None:
            fail("reasoning_open_tag needs reasoning_close_tag.", "reasoning_open_tag")
        if self.seed is not None and (
            not isinstance(self.seed, int) or not _INT64_MIN <= self.seed <= _INT64_MAX
        ):
            fail(f"sampling_seed must be in [-2**63, 2**63 - 1], got {self.seed}.", "seed")

    def verify_vocab(self, vocab_size: int) -> None:
        """Checks the token-id fields against the model's vocabulary."""
        for token_id in self.logit_bias or {}:
            if not 0 <= token_id < vocab_size:
                raise InvalidRequestError(
                    f"logit_bias must has keys in [0, {vocab_size - 1}], got {token_id}.",
                    param="sampling_params.logit_bias",
                )
        for token_id in self.stop_token_ids:
            if token_id >= vocab_size:
                raise InvalidRequestError(
                    f"stop_token_ids must be in [0, {vocab_size - 1}], got {token_id}.",
                    param="sampling_params.stop_token_ids",
                )

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> SamplingParams:
        """Builds from a wire dict: unknown keys are rejected, `null` values mean the default,
        `sampling_seed` is accepted as an alias of `seed`, and wrong types are reported by name."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise InvalidRequestError("sampling_params must be a JSON object.", param="sampling_params")
        names = _field_names(cls)
        kwargs: dict[str, Any] = {}
        for key, value in raw.items():
            name = "seed" if key == "sampling_seed" else key
            if name not in names:
                expected = ", ".join(sorted(names))
                raise InvalidRequestError(
                    f"unknown field `{key}` in sampling_params, expected one of {expected}",
                    param=f"sampling_params.{key}",
                )
            if value is None and name not in NULLABLE_FIELDS:
                continue
            kwargs[name] = coerce_field(name, value)
        return cls(**kwargs)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    # dataclasses.fields() walks the class each call; this runs once per request.
    return frozenset(f.name for f in dataclasses.fields(cls))
