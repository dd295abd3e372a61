"""JSON out: UTF-8, and never a NaN or Infinity (not JSON; such floats, e.g. the logprob of a
masked token, become null). A lone UTF-16 surrogate (a client may send one as a `\\udXXX`
escape, and an error message may echo it) has no UTF-8 form: such a payload goes out as ASCII
JSON, the surrogate escaped as it came."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse

# One encoder for every call: `json.dumps` with options builds a new one each time, which costs
# a streamed event a sixth of its encoding.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def dumps(payload: Any) -> bytes:
    try:
        text = _ENCODER.encode(payload)
    except ValueError:  # a non-finite float somewhere: the rare path
        payload = _finite(payload)
        text = _ENCODER.encode(payload)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate somewhere: the rarer path
        return _ASCII_ENCODER.encode(payload).encode("ascii")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class JSONOut(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)
