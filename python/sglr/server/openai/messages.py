"""Chat messages -> the prompt: validated, then rendered with the model's chat template (or
the one given with `--chat-template`) and tokenized without adding special tokens again.

For a model that takes images, `image_url` content parts become `{"type": "image"}` parts for
the template (which renders the image token) and their URLs are collected, in order, for the
engine's `image_data`; each remembers where it stood, so an error names that part."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import LimitExceededError
from sglr.http.errors import ApiError
from sglr.http.request import json_type
from sglr.limits import MAX_MESSAGES
from sglr.server.image_sources import ImageSources, RequestImages

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# Message keys passed through to the template as given (templates for tool use read them).
_PASSTHROUGH_KEYS = ("name", "tool_calls", "tool_call_id")


@dataclass(frozen=True)
class ImagePart:
    url: str
    where: str  # e.g. "messages[0].content[1].image_url"


def normalize_messages(
    raw: Any,
    images: list[ImagePart] | None = None,
    sources: RequestImages | None = None,
    max_messages: int = MAX_MESSAGES,
) -> list[dict[str, Any]]:
    """Plain `{"role", "content": str}` dicts (text parts joined); 400s point at the message.
    With `images` (a model that takes them), a message with image parts keeps a list of text and
    image parts, and the images are appended to `images` and checked into `sources` (default:
    inline ones only); without, image parts are a 400."""
    sources = sources if sources is not None else RequestImages(ImageSources())
    if not isinstance(raw, list) or not raw:
        raise ApiError.bad_request("messages must be a non-empty array", "messages")
    if len(raw) > max_messages:
        raise LimitExceededError(
            f"messages has {len(raw)} messages, over the server's limit of {max_messages}",
            "messages",
            "max_messages",
        )
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError.bad_request(f"{where} must be an object, got {json_type(message)}", where)
        role = message.get("role")
        if not isinstance(role, str) or role.lower() not in ROLES:
            raise ApiError.bad_request(
                f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role"
            )
        role = role.lower()
        out: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _content(message.get("content"), role, f"{where}.content", images, sources),
        }
        for key in _PASSTHROUGH_KEYS:
            if message.get(key) is not None:
                out[key] = message[key]
        messages.append(out)
    return messages


def _content(
    content: Any, role: str, where: str, images: list[ImagePart] | None, sources: RequestImages
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return unicode_text(content, where)
    if content is None:
        if role == "assistant":  # an assistant turn that only called tools
            return ""
        raise ApiError.bad_request(f"{where} is required for role {role}", where)
    if isinstance(content, list):
        texts = []
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                raise ApiError.bad_request(f"{where}[{j}] must be an object", f"{where}[{j}]")
            kind = part.get("type")
            if kind == "image_url" and images is not None:
                url, at = _image_url(part, f"{where}[{j}]")
                sources.check(url, at)
                images.append(ImagePart(url, at))
                parts.append({"type": "image"})
                continue
            if kind != "text":
                raise ApiError.bad_request(
                    f"{where}[{j}].type {kind!r} is not supported: this server serves text-only models",
                    f"{where}[{j}].type",
                )
            if not isinstance(part.get("text"), str):
                raise ApiError.bad_request(f"{where}[{j}].text must be a string", f"{where}[{j}].text")
            texts.append(unicode_text(part["text"], f"{where}[{j}].text"))
            parts.append({"type": "text", "text": part["text"]})
        if any(part["type"] == "image" for part in parts):
            return parts
        return "".join(texts)
    raise ApiError.bad_request(f"{where} must be a string or an array of content parts", where)


def unicode_text(text: str, where: str) -> str:
    """`text`, unless it holds a lone UTF-16 surrogate (a valid JSON escape, but not Unicode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError.bad_request(
            f"{where} contains a lone UTF-16 surrogate (not valid Unicode)", where
        ) from None
    return text


def _image_url(part: dict[str, Any], where: str) -> tuple[str, str]:
    """The URL of an `image_url` part (`{"url": ...}`, or a bare string as some clients send)."""
    value = part.get("image_url")
    if isinstance(value, str):
        return value, f"{where}.image_url"
    if isinstance(value, dict) and isinstance(value.get("url"), str):
        return value["url"], f"{where}.image_url.url"
    raise ApiError.bad_request(f"{where}.image_url must be an object with a url string", f"{where}.image_url")
