"""The pieces of the Batch API without a server: reading multipart uploads, checking a batch's
JSONL, the priority its lines get, and the flags."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from sglr.http.errors import ApiError
from sglr.server.launch import build_parser
from sglr.server.openai.batches.execute import BATCH_PRIORITY, batch_priority
from sglr.server.openai.batches.flags import batch_settings
from sglr.server.openai.batches.multipart import parse_form
from sglr.server.openai.batches.validate import MAX_REPORTED_ERRORS, read_batch_input
from sglr.server.settings import ServerSettings


def encoded(files: dict, data: dict) -> tuple[str, bytes]:
    """A form as httpx (the openai client's transport) encodes it."""
    request = httpx.Request("POST", "http://x/v1/files", files=files, data=data)
    return request.headers["content-type"], request.read()


def test_multipart_parts_come_back_byte_for_byte() -> None:
    payload = b'{"a": 1}\r\n--not-the-boundary\r\n\xff\x00 end'
    content_type, body = encoded({"file": ("in put \u00e9.jsonl", payload)}, {"purpose": "batch"})
    form = parse_form(content_type, body)
    assert form["file"].data == payload and form["file"].filename == "in put \u00e9.jsonl"
    assert form["purpose"].data == b"batch" and form["purpose"].filename is None


def test_malformed_multipart_is_a_400_and_other_types_a_415() -> None:
    content_type, body = encoded({"file": ("a.jsonl", b"abc")}, {})
    with pytest.raises(ApiError) as truncated:
        parse_form(content_type, body[:-10])
    assert truncated.value.status == 400
    with pytest.raises(ApiError) as wrong_type:
        parse_form("application/json", b"{}")
    assert wrong_type.value.status == 415


def line(custom_id: str, url: str = "/v1/embeddings") -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": {"input": "x"}})


def test_a_good_file_reads_into_lines_and_blank_lines_are_skipped() -> None:
    batch = read_batch_input(f"{line('a')}\n\n{line('b')}\r\n".encode(), "/v1/embeddings")
    assert batch.errors == [] and batch.lines == [("a", {"input": "x"}), ("b", {"input": "x"})]


def test_bad_files_fail_with_openai_error_codes() -> None:
    assert read_batch_input(b"\n", "/v1/embeddings").errors[0]["code"] == "empty_file"
    assert read_batch_input(b"\xff", "/v1/embeddings").errors[0]["code"] == "invalid_file_format"
    missing = json.dumps({"method": "POST", "url": "/v1/embeddings", "body": {}})
    extra = json.dumps({**json.loads(line("z")), "headers": {}})
    found = read_batch_input(f"{missing}\n{extra}\n[1]\nNaN".encode(), "/v1/embeddings").errors
    assert [(e["line"], e["code"], e["param"]) for e in found] == [
        (1, "missing_required_parameter", "custom_id"), (2, "invalid_request", "headers"),
        (3, "invalid_json_line", None), (4, "invalid_json_line", None)]  # fmt: skip
    many = "\n".join("{" for _ in range(MAX_REPORTED_ERRORS + 5)).encode()
    assert len(read_batch_input(many, "/v1/embeddings").errors) == MAX_REPORTED_ERRORS


def test_batch_lines_rank_below_live_requests_in_either_priority_order() -> None:
    assert BATCH_PRIORITY < 0  # SGLang's default: larger values first; a live request has none (0)
    on = SimpleNamespace(enable_priority_scheduling=True)
    assert batch_priority(SimpleNamespace(config=on)) == BATCH_PRIORITY
    flipped = SimpleNamespace(config=SimpleNamespace(**vars(on), schedule_low_priority_values_first=True))
    assert batch_priority(flipped) == -BATCH_PRIORITY
    # Off, lines carry none: the engine would ignore it, or refuse it when told to.
    assert batch_priority(SimpleNamespace(config=SimpleNamespace(enable_priority_scheduling=False))) is None


def test_the_batch_flags_become_server_settings() -> None:
    args = build_parser().parse_args(
        ["--batch-storage-dir", "/tmp/b", "--batch-max-concurrency", "3", "--batch-max-file-bytes", "4096"]
    )
    settings = ServerSettings(**batch_settings(args))
    assert (settings.batch_storage_dir, settings.batch_max_concurrency) == ("/tmp/b", 3)
    assert (settings.batch_max_file_bytes, settings.batch_max_storage_bytes) == (4096, 1 << 30)
    with pytest.raises(ValueError, match="batch_max_concurrency"):
        ServerSettings(batch_max_concurrency=0)
