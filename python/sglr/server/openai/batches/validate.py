"""A batch's input file, read and checked before any line runs, as OpenAI checks it: each line
a JSON object `{"custom_id": str, "method": "POST", "url": <the batch's endpoint>, "body": {...}}`
with a `custom_id` no other line has. Any mistake fails the whole batch, with one error per bad
line (`errors.data`: `code`, `message`, `param`, `line` counted from 1); a line's body itself is
checked when it runs, by its route (a bad one is that line's error, in the error file)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_BATCH_LINES = 50_000  # OpenAI's bound on the requests of one batch
MAX_REPORTED_ERRORS = 100  # a file of bad lines fails with the first of them, not all
_LINE_FIELDS = frozenset({"custom_id", "method", "url", "body"})


@dataclass
class BatchInput:
    lines: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (custom_id, body)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def fail(self, code: str, message: str, line: int | None, param: str | None = None) -> None:
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append({"code": code, "message": message, "param": param, "line": line})


def read_batch_input(data: bytes, endpoint: str) -> BatchInput:
    batch = BatchInput()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        batch.fail("invalid_file_format", "the input file is not UTF-8 text", None)
        return batch
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(batch.lines) >= MAX_BATCH_LINES:
            batch.fail("too_many_requests", f"a batch has at most {MAX_BATCH_LINES} requests", number)
            break
        line = _read_line(batch, raw, number, endpoint)
        if line is None:
            continue
        if line[0] in seen:
            batch.fail("duplicate_custom_id", f"custom_id {line[0]!r} is on an earlier line too", number,
                       "custom_id")  # fmt: skip
            continue
        seen.add(line[0])
        batch.lines.append(line)
    if not batch.lines and not batch.errors:
        batch.fail("empty_file", "the input file has no requests", None)
    return batch


def _read_line(batch: BatchInput, raw: str, number: int, endpoint: str) -> tuple[str, dict[str, Any]] | None:
    try:
        line = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        batch.fail("invalid_json_line", "this line is not valid JSON", number)
        return None
    if not isinstance(line, dict):
        batch.fail("invalid_json_line", "this line is not a JSON object", number)
        return None
    unknown = sorted(set(line) - _LINE_FIELDS)
    if unknown:
        batch.fail("invalid_request", f"unknown field `{unknown[0]}`", number, unknown[0])
        return None
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        batch.fail("missing_required_parameter", "custom_id must be a non-empty string", number, "custom_id")
        return None
    if line.get("method") != "POST":
        batch.fail("invalid_method", "method must be POST", number, "method")
        return None
    if line.get("url") != endpoint:
        batch.fail("mismatched_endpoint", f"url must be the batch's endpoint {endpoint}", number, "url")
        return None
    body = line.get("body")
    if not isinstance(body, dict):
        batch.fail("invalid_request", "body must be a JSON object", number, "body")
        return None
    return custom_id, body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
