"""Which image sources an HTTP request may name.

By default a request carries its images inline (data URLs or bare base64): a path or a URL
would let any client make the server read its files or reach other hosts. `--allow-image-urls`
lets `file://`/paths and http(s) URLs through too. A refusal is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from sglr.engine.images.loading import source_kind
from sglr.http.errors import ApiError

_INLINE = ("data_url", "base64")
_WITH_URLS = (*_INLINE, "url", "file")


def check_image_source(item: Any, where: str, allow_urls: bool) -> None:
    if not isinstance(item, str):
        raise ApiError.bad_request(f"{where} must be a string (a data URL or base64)", where)
    kind = source_kind(item)
    if kind in (_WITH_URLS if allow_urls else _INLINE):
        return
    raise ApiError.bad_request(
        f"{where}: {kind} image sources are refused; send the image as a data URL "
        "(start the server with --allow-image-urls to accept paths and http(s) URLs)",
        where,
    )


def check_image_data(image_data: Any, is_batch: bool, allow_urls: bool, name: str = "image_data") -> None:
    """SGLang's native `image_data` or `video_data` (see `sglr.engine.io`): every source in it
    allowed (a video given as frames: every frame)."""
    if image_data is None:
        return
    entries = image_data if is_batch and isinstance(image_data, list) else [image_data]
    for i, entry in enumerate(entries):
        prefix = f"{name}[{i}]" if is_batch else name
        if entry is None:
            continue
        if isinstance(entry, list):
            for j, item in enumerate(entry):
                _check_item(item, f"{prefix}[{j}]", allow_urls)
        else:
            check_image_source(entry, prefix, allow_urls)


def _check_item(item: Any, where: str, allow_urls: bool) -> None:
    if isinstance(item, list):  # a video's frames
        for k, frame in enumerate(item):
            check_image_source(frame, f"{where}[{k}]", allow_urls)
    else:
        check_image_source(item, where, allow_urls)
