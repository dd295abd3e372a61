"""Reading one image from what a request carries: a PIL image, encoded bytes, a base64 data URL,
bare base64, a local path (or `file://` URL) or an http(s) URL.

`source_kind` classifies an item without reading it, so the server can refuse paths and URLs
unless it was started to allow them. Every failure is an `InvalidRequestError` naming the item
(`image_data[i]`): unknown kinds, undecodable or truncated data, and images over the limits.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglr.errors import InvalidRequestError
from sglr.limits import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, MAX_IMAGES_PER_REQUEST, MAX_VIDEO_FRAMES


@dataclass(frozen=True)
class ImageLimits:
    max_images: int = MAX_IMAGES_PER_REQUEST  # per request
    max_bytes: int = MAX_IMAGE_BYTES  # encoded size
    max_pixels: int = MAX_IMAGE_PIXELS  # width x height, checked before decoding the pixels
    max_video_frames: int = MAX_VIDEO_FRAMES  # frames a video given as a list may have
    video_num_frames: int = 8  # frames sampled from a video file


def source_kind(item: Any) -> str:
    """One of "pil", "bytes", "data_url", "url", "file", "base64"; "unknown" for other types."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        return "bytes"
    if not isinstance(item, str):
        return "pil" if hasattr(item, "getbands") and hasattr(item, "size") else "unknown"
    if item.startswith("data:"):
        return "data_url"
    if item.startswith(("http://", "https://")):
        return "url"
    if item.startswith("file://") or item.startswith(("/", "./", "../", "~")):
        return "file"
    if len(item) < 4096 and Path(item).suffix.lower() in (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp"):
        return "file"
    return "base64"


def load_image(item: Any, param: str, limits: ImageLimits) -> Any:
    """The decoded PIL image of `item` (`param` names it in errors)."""
    from PIL import Image

    kind = source_kind(item)
    if kind == "pil":
        _check_pixels(item.size, param, limits)
        return item
    if kind == "unknown":
        raise InvalidRequestError(
            f"{param} must be a path, a URL, a data URL, base64 text, bytes or a PIL image; "
            f"got {type(item).__name__}",
            param=param,
        )
    data = read_bytes(item, kind, param, limits)
    if len(data) > limits.max_bytes:
        raise InvalidRequestError(
            f"{param} is {len(data)} bytes; the limit is {limits.max_bytes} bytes", param=param
        )
    try:
        image = Image.open(io.BytesIO(data))
        _check_pixels(image.size, param, limits)
        image.load()  # decodes now: a truncated file fails here, not in the scheduler
    except InvalidRequestError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise InvalidRequestError(f"{param} is not a readable image: {exc}", param=param) from None
    return image


def read_bytes(item: Any, kind: str, param: str, limits: ImageLimits) -> bytes:
    """The encoded bytes `item` (of `source_kind` `kind`) names or holds."""
    if kind == "bytes":
        return bytes(item)
    if kind == "data_url":
        header, sep, payload = item.partition(",")
        if not sep or ";base64" not in header:
            raise InvalidRequestError(f"{param} is a data URL without base64 content", param=param)
        return _b64decode(payload, param)
    if kind == "file":
        path = Path(item[len("file://") :] if item.startswith("file://") else item).expanduser()
        try:
            if path.stat().st_size > limits.max_bytes:
                raise InvalidRequestError(
                    f"{param} is {path.stat().st_size} bytes; the limit is {limits.max_bytes} bytes",
                    param=param,
                )
            return path.read_bytes()
        except OSError as exc:
            raise InvalidRequestError(
                f"{param}: cannot read {str(path)!r}: {exc.strerror}", param=param
            ) from None
    if kind == "url":
        return _fetch(item, param, limits)
    return _b64decode(item, param)


def _b64decode(text: str, param: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(
            f"{param} is neither a path, a URL, a data URL nor valid base64", param=param
        ) from None


def _fetch(url: str, param: str, limits: ImageLimits) -> bytes:
    from sglr.engine.images.fetch import UrlPolicy, fetch_url

    # The engine's own caller is trusted with any address; a server checks its clients' URLs
    # against its policy and hands the engine the bytes (`sglr.server.image_sources`).
    return fetch_url(url, param, UrlPolicy(allow_any_address=True), limits.max_bytes)


def _check_pixels(size: tuple[int, int], param: str, limits: ImageLimits) -> None:
    width, height = size
    if width < 1 or height < 1 or width * height > limits.max_pixels:
        raise InvalidRequestError(
            f"{param} is {width}x{height} pixels; the limit is {limits.max_pixels} pixels", param=param
        )
