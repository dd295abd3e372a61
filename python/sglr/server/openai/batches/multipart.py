"""Reading a `multipart/form-data` body (RFC 7578), as `POST /v1/files` gets it: each part's
name, file name and bytes, exactly as sent. The body is whole already (bounded by the server's
body limit), so the parts are cut out of it rather than streamed."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message

from sglr.http.errors import ApiError


@dataclass(frozen=True)
class FormPart:
    name: str
    filename: str | None
    data: bytes


def _header_params(value: str) -> Message:
    # The standard library's header reader knows RFC 2231 and quoted parameters.
    message = Message()
    message["content-disposition"] = value
    return message


def boundary_of(content_type: str | None) -> bytes:
    message = Message()
    message["content-type"] = content_type or ""
    if message.get_content_type() != "multipart/form-data":
        raise ApiError(415, "the upload must be multipart/form-data")
    boundary = message.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise ApiError.bad_request("the multipart/form-data content type has no boundary")
    return boundary.encode("latin-1")


def parse_form(content_type: str | None, body: bytes) -> dict[str, FormPart]:
    """The form's parts by name (the first of a repeated name); 400 for a malformed body."""
    delimiter = b"\r\n--" + boundary_of(content_type)
    pieces = (b"\r\n" + body).split(delimiter)
    parts: dict[str, FormPart] = {}
    for piece in pieces[1:]:  # pieces[0]: the preamble
        if piece.startswith(b"--"):
            return parts
        line_end = piece.find(b"\r\n")
        if line_end < 0 or piece[:line_end].strip(b" \t"):
            break
        head, found, data = piece[line_end + 2 :].partition(b"\r\n\r\n")
        if not found:
            break
        part = _part(head, data)
        parts.setdefault(part.name, part)
    raise ApiError.bad_request("the multipart/form-data body is malformed (no closing boundary)")


def _part(head: bytes, data: bytes) -> FormPart:
    disposition = None
    for line in head.decode("utf-8", "replace").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-disposition":
            disposition = value.strip()
    if disposition is None:
        raise ApiError.bad_request("a multipart/form-data part has no Content-Disposition")
    params = _header_params(disposition)
    name = params.get_param("name", header="content-disposition")
    filename = params.get_param("filename", header="content-disposition")
    if not isinstance(name, str):
        raise ApiError.bad_request("a multipart/form-data part has no name")
    return FormPart(name, filename if isinstance(filename, str) else None, data)
