"""Reading one `sampling_params` value off the wire: its expected JSON type, by field name, and
a typed error naming the field when it has another (`SamplingParams.from_dict` calls it)."""

from __future__ import annotations

import math
from typing import Any

from sglr.errors import InvalidRequestError

# Fields whose `null` is a value (no limit, no constraint), not "the default".
NULLABLE_FIELDS = {"max_new_tokens", "json_schema", "regex", "ebnf", "structural_tag", "logit_bias", "seed"}
_FLOATS = {"temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty"}
_INTS = {"max_new_tokens", "min_new_tokens", "top_k", "n", "seed"}
_BOOLS = {
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "json_schema_any_order",
}


def coerce_field(name: str, value: Any) -> Any:
    def wrong(expected: str) -> InvalidRequestError:
        return InvalidRequestError(
            f"invalid type for sampling_params.{name}: expected {expected}, got {type(value).__name__}",
            param=f"sampling_params.{name}",
        )

    if value is None:
        return None
    if name in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong("a number")
        try:
            return float(value)
        except OverflowError:  # an integer past every float
            raise wrong("a finite number") from None
    if name in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise wrong("an integer")
        return value
    if name in _BOOLS:
        if not isinstance(value, bool):
            raise wrong("a boolean")
        return value
    if name in ("stop", "stop_regex"):
        if isinstance(value, str) or (isinstance(value, list) and all(isinstance(s, str) for s in value)):
            return value
        raise wrong("a string or a list of strings")
    if name == "stop_token_ids":
        if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
            return value
        raise wrong("a list of integers")
    if name in (
        "json_schema",
        "regex",
        "ebnf",
        "structural_tag",
        "reasoning_open_tag",
        "reasoning_close_tag",
    ):
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    if name == "logit_bias":
        if not isinstance(value, dict):
            raise wrong("an object mapping token ids to numbers")
        try:
            bias = {int(k): float(v) for k, v in value.items()}
        except (TypeError, ValueError, OverflowError):
            raise wrong("an object mapping token ids to numbers") from None
        if not all(math.isfinite(v) for v in bias.values()):  # "nan", "inf", 1e400
            raise InvalidRequestError(
                "sampling_params.logit_bias values must be finite numbers", param="sampling_params.logit_bias"
            )
        return bias
    return value
