"""JSON out: UTF-8, and never a NaN or Infinity (not JSON; such floats, e.g. the logprob of a
masked token, become null)."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse

# One encoder for every call: `json.dumps` with options builds a new one each time, which costs
# a streamed event a sixth of its encoding.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(payload: Any) -> bytes:
    try:
        text = _ENCODER.encode(payload)
    except ValueError:  # a non-finite float somewhere: the rare path
        text = _ENCODER.encode(_finite(payload))
    return text.encode("utf-8")


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
