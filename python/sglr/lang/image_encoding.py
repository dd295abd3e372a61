"""Images in prompts travel as base64 (in messages, native requests and serialized graphs)."""

from __future__ import annotations

import base64
import io
import os
from typing import Any


def encode_image_base64(source: Any) -> str:
    """Base64 of an image given as a file path, raw bytes or a PIL image (PNG-encoded)."""
    if isinstance(source, (bytes, bytearray)):
        return base64.b64encode(bytes(source)).decode()
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as file:
            return base64.b64encode(file.read()).decode()
    if hasattr(source, "save"):  # a PIL image, without importing PIL
        buffer = io.BytesIO()
        source.save(buffer, format="PNG")
        return base64.b64encode(buffer.getvalue()).decode()
    raise TypeError(f"cannot read an image from a {type(source).__name__}; pass a path, bytes or a PIL image")
