"""JSON out: UTF-8, and never a NaN or Infinity (not JSON; such floats, e.g. the logprob of a
masked token, become null)."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse


def dumps(payload: Any) -> bytes:
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # a non-finite float somewhere: the rare path
        text = json.dumps(_finite(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
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
