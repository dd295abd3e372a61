"""OpenAI request fields -> sglr sampling parameters (shared by completions and chat).

Standard fields keep OpenAI's names and ranges in error messages (`max_tokens`, not
`max_new_tokens`). SGLang's extensions are accepted too: `top_k`, `min_p`, `min_tokens`,
`repetition_penalty`, `stop_token_ids`, `ignore_eos`, `skip_special_tokens`,
`spaces_between_special_tokens`, `no_stop_trim`, `regex`, `ebnf` and `json_schema` (and
`priority`, which the routes pass on to the engine's scheduler); a `response_format` of type
`structural_tag` becomes the engine's `structural_tag`; and sglr's
`json_schema_any_order` (an object's declared properties in any order, for this request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sglr.errors import InvalidStructuralTagError
from sglr.http.errors import ApiError
from sglr.http.request import get_bool, get_dict, get_int, get_int_list, get_number, get_stop, get_str
from sglr.limits import MAX_N
from sglr.server.param_names import ParamNames
from sglr.structural_tag import parse_structural_tag

SAMPLING_FIELDS = frozenset({
    "model", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "presence_penalty",
    "frequency_penalty", "logit_bias", "stream", "stream_options", "response_format", "user",
    "top_k", "min_p", "min_tokens", "repetition_penalty", "stop_token_ids", "ignore_eos",
    "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "regex", "ebnf", "rid",
    "metadata", "store", "service_tier", "lora_path", "json_schema_any_order",
    "priority",  # SGLang's scheduling hint (a batch's lines carry one); not used by sampling
})  # fmt: skip


@dataclass(frozen=True)
class Sampling:
    """The engine's `sampling_params` dict, and which request field each engine field came from
    (so that an engine error names the field the client sent)."""

    params: dict[str, Any]
    names: ParamNames


def sampling_params(
    body: dict[str, Any], max_tokens: int | None, max_tokens_field: str = "max_tokens"
) -> Sampling:
    """`max_tokens` already resolved by the route, from the request field `max_tokens_field`."""
    params: dict[str, Any] = {"max_new_tokens": max_tokens}
    numbers = {
        "temperature": (0.0, 2.0),
        "top_p": (0.0, 1.0),
        "presence_penalty": (-2.0, 2.0),
        "frequency_penalty": (-2.0, 2.0),
        "min_p": (0.0, 1.0),
        "repetition_penalty": (0.0, 2.0),
    }
    for name, (low, high) in numbers.items():
        value = get_number(body, name, None, low, high)
        if value is not None:
            params[name] = value
    if params.get("top_p") == 0.0:
        raise ApiError.bad_request("top_p must be in (0, 1], got 0.0", "top_p")
    if params.get("repetition_penalty") == 0.0:
        raise ApiError.bad_request("repetition_penalty must be in (0, 2], got 0.0", "repetition_penalty")
    top_k = get_int(body, "top_k", None)
    if top_k is not None:
        if top_k == 0 or top_k < -1:
            raise ApiError.bad_request(f"top_k must be -1 (disable) or at least 1, got {top_k}", "top_k")
        params["top_k"] = top_k
    params["n"] = get_int(body, "n", 1, 1, MAX_N)
    seed = get_int(body, "seed", None, -(2**63), 2**63 - 1)
    if seed is not None:
        params["seed"] = seed
    min_tokens = get_int(body, "min_tokens", 0, 0)
    if max_tokens is not None and min_tokens > max_tokens:
        raise ApiError.bad_request(
            f"min_tokens ({min_tokens}) must not exceed the maximum tokens ({max_tokens})", "min_tokens"
        )
    params["min_new_tokens"] = min_tokens
    stop = get_stop(body)
    if stop:
        if any(not s for s in stop):
            raise ApiError.bad_request("stop strings must not be empty", "stop")
        params["stop"] = stop
    stop_ids = get_int_list(body, "stop_token_ids")
    if stop_ids:
        params["stop_token_ids"] = stop_ids
    for name in (
        "ignore_eos",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "no_stop_trim",
        "json_schema_any_order",
    ):
        value = get_bool(body, name, None)
        if value is not None:
            params[name] = value
    logit_bias = _logit_bias(body)
    if logit_bias:
        params["logit_bias"] = logit_bias
    grammar, grammar_source = _grammar(body)
    params.update(grammar)
    sources = {"max_new_tokens": max_tokens_field, "min_new_tokens": "min_tokens", **grammar_source}
    return Sampling(params, ParamNames(sources))


def _logit_bias(body: dict[str, Any]) -> dict[str, float] | None:
    raw = get_dict(body, "logit_bias")
    if not raw:
        return None
    out = {}
    for key, value in raw.items():
        try:
            token_id = int(key)
        except ValueError:
            raise ApiError.bad_request(
                f"logit_bias keys must be token ids, got {key!r}", "logit_bias"
            ) from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -100 <= value <= 100:
            raise ApiError.bad_request(
                f"logit_bias values must be numbers in [-100, 100], got {value!r}", "logit_bias"
            )
        out[str(token_id)] = float(value)
    return out


def _grammar(body: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """`response_format` (json_schema / json_object / text), the `regex` / `ebnf` extensions and, on
    completions, SGLang's top-level `json_schema`: at most one of them. Returns the sampling
    fields and, for each, the request field it came from."""
    grammars: dict[str, tuple[str, str]] = {}  # source field -> (sampling key, value)
    response_format = get_dict(body, "response_format")
    if response_format is not None:
        kind = response_format.get("type")
        if kind == "json_schema":
            grammars["response_format"] = ("json_schema", _response_schema(response_format))
        elif kind == "json_object":
            grammars["response_format"] = ("json_schema", '{"type": "object"}')
        elif kind == "structural_tag":
            grammars["response_format"] = ("structural_tag", _structural_tag(response_format))
        elif kind != "text":
            raise ApiError.bad_request(
                "response_format.type must be one of text, json_object, json_schema, structural_tag, "
                f"got {kind!r}",
                "response_format.type",
            )
    regex = get_str(body, "regex")
    if regex:
        grammars["regex"] = ("regex", regex)
    ebnf = get_str(body, "ebnf")
    if ebnf:
        grammars["ebnf"] = ("ebnf", ebnf)
    schema = body.get("json_schema")
    if schema is not None and schema != "":
        grammars["json_schema"] = ("json_schema", _schema_text(schema, "json_schema"))
    if len(grammars) > 1:
        raise ApiError.bad_request(f"give only one of {', '.join(sorted(grammars))}", sorted(grammars)[1])
    params = {key: value for key, value in grammars.values()}
    sources = {key: source for source, (key, _) in grammars.items()}
    return params, sources


def _response_schema(response_format: dict[str, Any]) -> str:
    spec = response_format.get("json_schema")
    if spec is None and "schema" in response_format:  # the bare form some clients send
        spec = {"schema": response_format["schema"]}
    if not isinstance(spec, dict):
        raise ApiError.bad_request(
            "response_format.json_schema must be an object with a `schema`", "response_format.json_schema"
        )
    if "schema" not in spec:
        raise ApiError.bad_request(
            "response_format.json_schema.schema is required", "response_format.json_schema.schema"
        )
    return _schema_text(spec["schema"], "response_format.json_schema.schema")


def _structural_tag(response_format: dict[str, Any]) -> str:
    """The tag as the engine's JSON text, its shape checked here so that a 400 names the part."""
    try:
        parse_structural_tag(response_format)
    except InvalidStructuralTagError as exc:
        field = f"response_format.{exc.field}" if exc.field else "response_format"
        raise ApiError.bad_request(str(exc), field) from None
    return json.dumps(response_format)


def _schema_text(schema: Any, field: str) -> str:
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise ApiError.bad_request(f"{field} is not valid JSON: {exc}", field) from None
    if not isinstance(schema, (dict, bool)):
        raise ApiError.bad_request(f"{field} must be a JSON schema (an object)", field)
    return json.dumps(schema)
